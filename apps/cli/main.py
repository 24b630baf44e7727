"""The ``nodeau`` command: a thin cyclopts shell.

Commands are registered lazily (``"module:function"``), so ``--help`` and
quick listings import little; the work is done by the domain and adapters.
"""

from __future__ import annotations

import sys
from importlib.metadata import version

from cyclopts import App

app = App(
    name="nodeau",
    help="Run LLM inference on your own GPU machines, admitted by predicted peak VRAM.",
    version=lambda: version("nodeau"),
)
app.command(
    "nodeau.apps.cli.models:models_app",
    name="models",
    help="Fetch catalog models and import your own GGUF files.",
)
for command, words in (
    ("run", "Admit, place and serve a model on this machine, behind a loopback endpoint."),
    ("ps", "Every workload holding a GPU, with its state and what happens next."),
    ("stop", "Stop a workload's endpoint (--workload: the model too, freeing its card)."),
    ("environment", "What this machine has, read-only."),
):
    app.command(f"nodeau.apps.cli.serving:{command}", name=command, help=words)
for group, words in (
    ("service", "Explain a service's admission."),
    ("placement", "Explain a workload's placement."),
    ("fleet", "The machines Nodeau can place work on."),
):
    app.command(f"nodeau.apps.cli.serving:{group}_app", name=group, help=words)
app.command(
    "nodeau.apps.cli.batch:batch_app",
    name="batch",
    help="Run a finite set of requests (OpenAI batch JSONL), then free the card.",
)
app.command(
    "nodeau.apps.cli.models:model_app",
    name="model",
    help="What this machine holds: status, verification, details.",
)


def run() -> None:
    """Console-script entry point: expected failures print one line, never a traceback."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        from nodeau.apps.cli.errors import one_line

        message = one_line(exc)
        if message is None:
            raise
        print(f"nodeau: {message}", file=sys.stderr)
        sys.exit(1)
