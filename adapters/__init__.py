"""Adapters: one outside library per module, each implementing a port."""
