"""The local dashboard (``nodeau dashboard``): a read-only page of hardware, workloads,
models, recovery, alerts and the plan, with one action (stop a batch job) and the
Playground, on 127.0.0.1 only and behind a token (docs/dashboard.md, docs/adr/0012)."""
