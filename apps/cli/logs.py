"""``nodeau logs NAME [--lines N]``: the last lines of a workload's model server log.

What a model server wrote, its start lines (``--- nodeau: ...``) included: where to look
when ``nodeau ps`` says it failed to start or keeps restarting. On a fleet on Kubernetes
it is not available yet (the plane says so).
"""

from __future__ import annotations

from nodeau.apps.planes.machine import LOG_LINES


def logs(name: str, /, *, lines: int = LOG_LINES) -> int:
    """Print the last lines of a workload's model server log.

    Parameters
    ----------
    name
        The workload's name (nodeau ps lists them).
    lines
        How many lines, from the end.
    """
    from nodeau.apps.cli.bootstrap import plane
    from nodeau.ports.errors import SettingsError

    if lines < 1:
        raise SettingsError(f"--lines {lines}: give a positive number of lines")
    for line in plane().logs(name, lines):
        print(line)
    return 0
