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
    version=version("nodeau"),
)
app.command(
    "nodeau.apps.cli.models:models_app",
    name="models",
    help="Fetch catalog models and import your own GGUF files.",
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
