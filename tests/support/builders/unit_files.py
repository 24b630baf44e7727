"""Reading the systemd user units nodeau writes, as systemd reads them.

``sections`` gives a unit's ``[Section] Key=value`` lines (each key once);
``exec_start_argv`` splits an ``ExecStart=`` value into the argument vector systemd
would run.
"""

from __future__ import annotations

import shlex


def sections(unit: str) -> dict[str, dict[str, str]]:
    """A unit's ``[Section] Key=value`` lines (each key once in what nodeau writes)."""
    parsed: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in unit.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = parsed.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        assert key not in current, f"{key} twice"
        current[key] = value
    return parsed


def exec_start_argv(value: str) -> list[str]:
    """``ExecStart=`` split as systemd splits it, for what nodeau writes: double quotes with
    ``\\\\`` and ``\\"`` escapes (shlex's POSIX rules agree there), then ``%%`` and ``$$``."""
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(value, posix=True)]
