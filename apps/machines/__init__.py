"""Machines and their marks: ``fleet list``, drain, placement policy and the upgrading mark.

``commands`` is what the CLI, the cloud reporter and the dashboard ask; ``machine`` answers
it for this machine (marks in SQLite), ``fleet`` for a fleet on Kubernetes (marks on Nodes).
"""
