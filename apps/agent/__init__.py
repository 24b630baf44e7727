"""The node agent: reports its machine's GPUs and verified models, renews its Lease."""
