"""Each card's memory on the board: the ledger's reservation against the card's total, and
the card's own reading of what is in use only where one exists (this machine's real cards),
never a figure made up for a simulated card, and the line saying which."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from nodeau.apps.copies.commands import CopyListing
from nodeau.apps.dashboard import cards
from nodeau.apps.dashboard.board import read_board
from nodeau.apps.dashboard.cards import CardReadings, card_readings, reading_line
from nodeau.apps.machines.commands import GpuView
from nodeau.apps.planes.plane import Plane
from nodeau.apps.recovery.commands import RecoveryListing
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.ports.hardware import HardwareError
from tests.support.builders.dashboard_views import GIB, NOW, FakePlane, fleet, machine, plan

MIB = 1024**2


def reading(
    free: dict[str, int], machine_name: str = "box-a", *, simulated: bool = False
) -> MachineReading:
    """This machine's cards as its inventory reads them: ``free`` bytes by card UUID (24 GiB
    each)."""
    return MachineReading(
        machine=machine_name,
        gpus=tuple(
            GpuReading(
                gpu=Gpu(uuid=uuid, model="L4", total_bytes=24 * GIB, simulated=simulated),
                free_bytes=left,
                driver_version="550",
            )
            for uuid, left in free.items()
        ),
        simulated=simulated,
        note="read",
    )


def board_with(*machines: Any, cards_read: Any) -> dict[str, Any]:
    plane = FakePlane(
        machines=fleet(*machines), workloads=(), batches=(),
        copies=CopyListing(plane="p", copies=()),
        recovery=RecoveryListing(plane="p", control_plane="none", services=()), plan=plan(),
    )  # fmt: skip

    def read() -> MachineReading | None:
        if isinstance(cards_read, Exception):
            raise cards_read
        return cast(MachineReading | None, cards_read)

    document = read_board(cast(Plane, plane), lambda: (), NOW, cards=read)
    return cast(dict[str, Any], json.loads(json.dumps(document)))  # as the page gets it


def test_a_real_card_here_shows_its_reservation_and_its_own_reading_apart() -> None:
    here = reading({"GPU-1": 19 * GIB, "GPU-2": 24 * GIB - 512 * MIB})
    board = board_with(machine("box-a"), cards_read=here)
    [card] = board["hardware"]["machines"]
    assert card["gpus"]["memory"] == [
        {"total_bytes": 24 * GIB, "reserved_bytes": 3 * GIB, "used_bytes": 5 * GIB,
         "total": "24.00 GiB", "reserved": "3.00 GiB", "used": "5.00 GiB"},
        {"total_bytes": 24 * GIB, "reserved_bytes": 0, "used_bytes": 512 * MIB,
         "total": "24.00 GiB", "reserved": "0 B", "used": "512.00 MiB"},
    ]  # fmt: skip
    assert card["reading"] == cards.READ_HERE
    # the table's rows are the CLI's, as they were
    assert card["gpus"]["rows"][0] == ["GPU-1", "L4", "24.00 GiB", "chat", "3.00 GiB"]


def test_a_simulated_card_has_its_reservation_and_no_reading_made_up() -> None:
    simulated = machine("box-a", simulated=True)
    # the simulated inventory calls every card wholly free: that is no measurement
    here = reading({"GPU-1": 24 * GIB, "GPU-2": 24 * GIB}, simulated=True)
    board = board_with(simulated, cards_read=here)
    [card] = board["hardware"]["machines"]
    assert [(m["reserved"], m["used_bytes"], m["used"]) for m in card["gpus"]["memory"]] == [
        ("3.00 GiB", None, None),
        ("0 B", None, None),
    ]
    assert card["reading"] == cards.SIMULATED


def test_another_machine_s_card_is_not_read_here_and_says_where_it_is_read() -> None:
    here = reading({"GPU-1": 20 * GIB}, "box-a")
    other = machine(
        "box-b",
        gpus=(GpuView(uuid="GPU-9", model="L4", total_bytes=24 * GIB, held_by=None,
                      reserved_bytes=0),),
    )  # fmt: skip
    board = board_with(machine("box-a"), other, cards_read=here)
    mine, theirs = board["hardware"]["machines"]
    assert mine["gpus"]["memory"][0]["used"] == "4.00 GiB"
    assert theirs["gpus"]["memory"][0]["used_bytes"] is None
    assert theirs["reading"] == (
        "in use: no reading here: box-b's cards are read on box-b, this dashboard runs on box-a"
    )


def test_this_machine_without_a_readable_card_says_what_its_reading_found() -> None:
    none_found = MachineReading(
        machine="box-a", gpus=(), simulated=False, note="no NVIDIA GPU found: no driver"
    )
    board = board_with(machine("box-a"), cards_read=none_found)
    [card] = board["hardware"]["machines"]
    assert [m["used_bytes"] for m in card["gpus"]["memory"]] == [None, None]
    assert card["reading"] == (
        "in use: no reading: this machine's reading found none of them"
        " (no NVIDIA GPU found: no driver)"
    )


def test_a_reading_that_fails_is_said_on_the_cards_and_the_rest_of_the_board_stands() -> None:
    board = board_with(machine("box-a"), cards_read=HardwareError("NVML on box-a: no driver"))
    [card] = board["hardware"]["machines"]
    assert [m["used_bytes"] for m in card["gpus"]["memory"]] == [None, None]
    assert [m["reserved"] for m in card["gpus"]["memory"]] == ["3.00 GiB", "0 B"]
    assert card["reading"] == (
        "in use: no reading: this machine's cards could not be read (NVML on box-a: no driver)"
    )
    assert board["notes"] == {}  # no section is missing: only the reading


@pytest.mark.parametrize(
    ("changes", "readings", "line"),
    [
        ({"simulated": True}, CardReadings(here="box-a", used={"GPU-1": 1}), cards.SIMULATED),
        ({}, CardReadings(here="box-a", used={"GPU-1": 1}), cards.READ_HERE),
        ({"simulated": None}, CardReadings(), cards.NOT_YET),
        ({}, CardReadings(), cards.NOT_ASKED),
    ],
)
def test_each_machine_says_where_its_in_use_figures_come_from_or_why_there_are_none(
    changes: dict[str, Any], readings: CardReadings, line: str
) -> None:
    assert reading_line(machine("box-a", **changes), readings) == line


def test_only_real_cards_of_a_reading_count_as_read() -> None:
    real = reading({"GPU-1": 20 * GIB})
    mixed = MachineReading(
        machine="box-a",
        gpus=(
            *real.gpus,
            GpuReading(
                gpu=Gpu(uuid="GPU-S", model="s", total_bytes=GIB, simulated=True),
                free_bytes=GIB,
                driver_version="simulated",
            ),
        ),
        simulated=False,
        note="mixed",
    )
    assert card_readings(mixed).used == {"GPU-1": 4 * GIB}
    assert card_readings(reading({"GPU-1": 24 * GIB}, simulated=True)).used == {}
    assert card_readings(mixed).note == "mixed"
    assert card_readings(None, "why") == CardReadings(failed="why")
