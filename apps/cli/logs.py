"""``nodeau logs NAME [--lines N] [-f] [--json]``: a workload's model server log.

Why it is so: docs/adr/decisions/apps-cli.md (logs.py).
"""

from __future__ import annotations

import json as json_module
from typing import Annotated

from cyclopts import Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.serving.commands import LOG_LINES
from nodeau.ports.errors import SettingsError


def logs(
    name: str,
    /,
    *,
    lines: int = LOG_LINES,
    follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative="")] = False,
    json: bool = False,
) -> int:
    """Print the last lines of a workload's model server log.

    Parameters
    ----------
    name
        The workload's name (nodeau ps lists them).
    lines
        How many lines, from the end.
    follow
        Then print each line as it is written, as tail -f does, until Ctrl-C (exit 0).
    json
        Print {"name": NAME, "lines": [LINE, ...]}; with --follow, one
        {"name": NAME, "line": LINE} object a line (JSON Lines), as each is written.
    """

    if lines < 1:
        raise SettingsError(f"--lines {lines}: give a positive number of lines")
    if follow:
        return _follow(name, lines, json=json)
    found = bootstrap.plane().serving.logs(name, lines)
    if json:
        print(json_module.dumps({"name": name, "lines": list(found)}, indent=2))
        return 0
    for line in found:
        print(line)
    return 0


def _follow(name: str, lines: int, *, json: bool) -> int:
    """Print the log's lines as they come until Ctrl-C, which is the way to end it."""

    try:
        for line in bootstrap.plane().serving.follow_logs(name, lines):
            shown = json_module.dumps({"name": name, "line": line}) if json else line
            print(shown, flush=True)  # a reader of a pipe sees each line as it is written
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a follow ends: no traceback, no message
    return 0  # pragma: no cover - a followed log never ends by itself
