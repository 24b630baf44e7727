"""The local endpoint: an OpenAI-compatible reverse proxy from 127.0.0.1 to a workload's model
server, one process per workload on that workload's fixed port (``app`` is the HTTP shell,
``serve`` runs it, ``python -m nodeau.apps.endpoint`` is its composition root). It answers
only requests that name it as their ``Host`` and come from no web page but a loopback or
allowed one (``callers``), and sends on only JSON objects (``bodies``)."""
