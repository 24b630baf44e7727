"""The local endpoint: an OpenAI-compatible reverse proxy from 127.0.0.1 to a workload's model
server, one process per workload on that workload's fixed port (``app`` is the HTTP shell,
``serve`` runs it, ``python -m nodeau.apps.endpoint`` is its composition root)."""
