"""Kubernetes adapters: the fleet's state, reports and marks kept in a real cluster."""
