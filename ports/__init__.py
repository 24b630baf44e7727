"""Ports: ``typing.Protocol`` interfaces, named by role, speaking domain types."""
