"""``nodeau models copy`` and ``nodeau models copies``: printing copies, and waiting for one.

Why it is so: docs/adr/decisions/apps-cli.md (copies.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import size, table
from nodeau.ports.errors import NodeauError

if TYPE_CHECKING:
    from nodeau.apps.copies.commands import CopyCommands, CopyListing, CopyView

POLL_S = 1.0
HEADERS = ("MACHINE", "MODEL", "ARTIFACT", "STATE", "PROGRESS", "ASKED BY")


class CopyFailed(NodeauError):
    """The copy waited for failed; its reason is the line."""


class CopyGone(NodeauError):
    """The copy waited for is no longer asked for."""


def progress_text(view: CopyView) -> str:
    if view.bytes_total is None or view.bytes_done is None:
        return "-"
    percent = 100 if view.bytes_total <= 0 else view.bytes_done * 100 // view.bytes_total
    return f"{size(view.bytes_done)} of {size(view.bytes_total)} ({percent}%)"


def row(view: CopyView) -> tuple[str, ...]:
    return (
        view.machine,
        view.model,
        view.artifact[:12],
        view.state,
        progress_text(view),
        ", ".join(view.asked_by) or "-",
    )


def listing_lines(listing: CopyListing) -> list[str]:
    """The table, then what each copy that is not ready says."""
    lines = [table(HEADERS, [row(c) for c in listing.copies])]
    said = [f"  {c.machine}/{c.model}: {c.sentence}" for c in listing.copies if c.state != "ready"]
    return [*lines, "now:", *said] if said else lines


def wait_until_settled(
    copies: CopyCommands,
    machine: str,
    artifact: str,
    name: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> CopyView:
    """Wait until the copy of ``artifact`` on ``machine`` is ready (the copy then) or failed
    (``CopyFailed``); what happens meanwhile goes to stderr."""

    said = None
    with bootstrap.fetch_progress(f"{name} on {machine}") as show:
        while True:
            view = next(
                (
                    c
                    for c in copies.listing().copies
                    if (c.machine, c.artifact) == (machine, artifact)
                ),
                None,
            )
            if view is None:
                raise CopyGone(f"the copy of {name} on {machine} is no longer asked for")
            if view.state == "ready":
                return view
            if view.state == "failed":
                raise CopyFailed(f"the copy of {name} on {machine} failed: {view.sentence}")
            if view.state == "fetching" and view.bytes_total:
                show(view.bytes_done or 0, view.bytes_total)
            else:
                line = f"{machine}: {view.state}: {view.sentence}"
                if line != said:
                    print(line, file=sys.stderr, flush=True)
                said = line
            sleep(POLL_S)
