"""The ``nodeau`` command: a thin cyclopts shell.

Commands are registered lazily (``"module:function"``), so ``--help`` and
quick listings import little; the work is done by the domain and adapters.
"""

from __future__ import annotations

from importlib.metadata import version

from cyclopts import App

app = App(
    name="nodeau",
    help="Run LLM inference on your own GPU machines, admitted by predicted peak VRAM.",
    version=version("nodeau"),
)


def run() -> None:
    """Console-script entry point."""
    app()
