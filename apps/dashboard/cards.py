"""Each card's memory on the page: Nodeau's ledger (what admission reserves there) against
its total, and apart from it the card's own reading of what is in use (NVML: total less
free, read on this machine). No reading, no figure: a simulated card's "all free" is no
measurement, another machine's card is read there, and a failed read says its one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from nodeau.apps.cli.render import size
from nodeau.apps.machines.commands import MachineView
from nodeau.domain.hardware import MachineReading

READ_HERE = "in use: each card's own reading (NVML: its total less its free memory), read now"
SIMULATED = "in use: no reading: simulated cards report none of their own"
NOT_YET = "in use: no reading: the machine has not reported yet"
NOT_ASKED = "in use: no reading: this dashboard reads no card"


@frozen(kw_only=True)
class CardReadings:
    """What this machine's cards report in use, read once per board."""

    here: str | None = None  # this machine, as its reading names it (None: not read)
    used: Mapping[str, int] = field(factory=dict)  # bytes in use, by card UUID
    failed: str | None = None  # why the reading failed, in one line
    note: str = ""  # what the reading said of this machine's cards ("no NVIDIA GPU found: ...")


def card_readings(reading: MachineReading | None, failed: str | None = None) -> CardReadings:
    """The bytes in use on each real card of this machine's reading; a simulated card has
    none (its "free" is the whole card, not a measurement)."""
    if reading is None:
        return CardReadings(failed=failed)
    if reading.simulated:
        return CardReadings(here=reading.machine, note=reading.note)
    return CardReadings(
        here=reading.machine,
        note=reading.note,
        used={
            r.gpu.uuid: max(r.gpu.total_bytes - r.free_bytes, 0)
            for r in reading.gpus
            if not r.gpu.simulated
        },
    )


def reading_line(m: MachineView, readings: CardReadings) -> str:
    """Where the in-use figures of ``m``'s cards come from, or why there are none."""
    if m.simulated:
        return SIMULATED
    if any(g.uuid in readings.used for g in m.gpus):
        return READ_HERE
    if m.simulated is None:
        return NOT_YET
    if readings.failed is not None:
        return f"in use: no reading: this machine's cards could not be read ({readings.failed})"
    if readings.here is None:
        return NOT_ASKED
    if m.machine == readings.here:  # this machine, and its reading has none of these cards
        return f"in use: no reading: this machine's reading found none of them ({readings.note})"
    return (
        f"in use: no reading here: {m.machine}'s cards are read on {m.machine},"
        f" this dashboard runs on {readings.here}"
    )


def card_memory(m: MachineView, readings: CardReadings) -> list[dict[str, Any]]:
    """Per card, the figures its bar is drawn from, in bytes and as the CLI writes them:
    total, reserved (the ledger), in use (the card's reading; None where there is none)."""
    found = []
    for g in m.gpus:
        used = None if m.simulated else readings.used.get(g.uuid)
        found.append(
            {
                "total_bytes": g.total_bytes,
                "reserved_bytes": g.reserved_bytes,
                "used_bytes": used,
                "total": None if g.total_bytes is None else size(g.total_bytes),
                "reserved": size(g.reserved_bytes),
                "used": None if used is None else size(used),
            }
        )
    return found
