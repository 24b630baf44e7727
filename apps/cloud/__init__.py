"""Nodeau Cloud, optional and off by default: sign-in, the reporter, and what is kept of it.

Why it is so: docs/adr/decisions/apps-cloud.md (__init__.py).
"""
