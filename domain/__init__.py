"""Nodeau's pure core: every decision over values, with no I/O.

Why it is so: docs/adr/decisions/domain.md (__init__.py).
"""
