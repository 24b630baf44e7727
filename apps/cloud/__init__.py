"""Nodeau Cloud, optional and off by default: sign-in, the reporter, and what is kept of it.

Nothing here runs unless a person runs ``nodeau cloud connect``; nothing here listens.
The CLI's ``nodeau cloud`` commands (``nodeau.apps.cli.cloud``) are thin shells over these
use cases, which take their ports (``NodeauCloud``, ``CloudState``, a ``Plane``) as
arguments. Decisions: docs/adr/0013-nodeau-cloud.md; the API and the settings:
docs/cloud.md.
"""
