"""The fleet controller: admission, placement and health for a Kubernetes fleet."""
