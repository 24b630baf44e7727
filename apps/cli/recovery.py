"""``nodeau recovery set|status``: what each service does when its machine stops answering.

Why it is so: docs/adr/decisions/apps-cli.md (recovery.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from cyclopts import App

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import table, to_json
from nodeau.apps.cli.serving import parse_after
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from nodeau.apps.recovery.commands import RecoveryListing, RecoveryView

recovery_app = App(
    name="recovery",
    help="Choose what a service does when its machine stops answering; see every choice.",
)

DEFAULT_AFTER = "3m"
HEADERS = ("NAME", "MACHINE", "STATE", "RECOVERY", "COPIES", "LAST RECOVERY")


@recovery_app.command(name="set")
def set_choice(
    name: str, choice: Literal["never", "automatic"], /, *, after: str | None = None
) -> int:
    """Choose what a service does when its machine stops answering; nothing restarts.

    Parameters
    ----------
    name
        The service.
    choice
        never: it waits for its machine (the default). automatic: it starts on another
        machine once its machine has been unreachable for the delay.
    after
        With automatic: the delay, e.g. 90s, 10m, 1h30m or 2d (default 3m).
    """

    if choice == "never" and after is not None:
        raise SettingsError(
            f"--after {after!r} applies to automatic recovery; a service set to never "
            "waits for its machine however long (leave --after out)"
        )
    delay = parse_after(DEFAULT_AFTER if after is None else after)
    print(bootstrap.plane().recovery.set_choice(name, RecoveryMode(choice), delay))
    return 0


@recovery_app.command(name="status")
def status(*, json: bool = False) -> int:
    """Every service's recovery choice, its copies and its last recovery.

    Parameters
    ----------
    json
        Print the listing as JSON.
    """

    listing = bootstrap.plane().recovery.status()
    if json:
        print(to_json(listing))
        return 0
    print("\n".join(status_lines(listing)))
    return 0


def status_lines(listing: RecoveryListing) -> list[str]:
    """``recovery status`` for a person: the plane, the deciding machine, a row per
    service, then what is happening to each one held or recovering."""
    services = listing.services
    lines = [
        f"plane: {listing.plane}",
        f"control plane: {listing.control_plane}",
        table(HEADERS, [row(v) for v in services]),
    ]
    for title, said in (
        ("now:", [(v.name, v.sentence) for v in services]),
        (
            "last recoveries:",
            [(v.name, v.last_recovery and v.last_recovery.sentence) for v in services],
        ),
        ("notes:", [(v.name, v.note) for v in services]),
    ):
        shown = [f"  {name}: {sentence}" for name, sentence in said if sentence]
        lines += [title, *shown] if shown else []
    return lines


def row(v: RecoveryView) -> tuple[str, ...]:
    """One line of the table: no copies known is ``-``, none at all is ``none``."""
    copies = "-" if v.copies is None else ", ".join(v.copies) or "none"
    last = v.last_recovery
    moved = "-" if last is None else f"{last.from_machine} -> {last.to_machine}"
    return (v.name, v.machine or "-", v.state, v.choice, copies, moved)
