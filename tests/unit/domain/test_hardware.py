"""Hardware: GPUs by UUID, and the newest report of a UUID wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.hardware import (
    AgentReport,
    Fleet,
    Gpu,
    Machine,
    latest_per_machine,
    merge_reports,
)
from tests.support.builders.fleets import gpu

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def report(machine: str, seconds: int, *uuids: str, control_plane: bool = False) -> AgentReport:
    return AgentReport(
        machine=machine,
        reported_at=at(seconds),
        gpus=tuple(gpu(u) for u in uuids),
        control_plane=control_plane,
    )


def layout(f: Fleet) -> dict[str, list[str]]:
    return {m.name: [g.uuid for g in m.gpus] for m in f.machines}


def test_a_machine_is_described_by_its_newest_report() -> None:
    f = merge_reports([report("garage", 10, "A", "B"), report("garage", 20, "A")])
    assert layout(f) == {"garage": ["A"]}


def test_an_older_report_arriving_late_changes_nothing() -> None:
    f = merge_reports([report("garage", 20, "A"), report("garage", 10, "A", "B")])
    assert layout(f) == {"garage": ["A"]}


def test_a_moved_card_belongs_to_the_machine_that_reported_it_last() -> None:
    # the card was in garage, then moved to attic; garage has not reported since
    f = merge_reports([report("garage", 10, "A", "B"), report("attic", 30, "B")])
    assert layout(f) == {"attic": ["B"], "garage": ["A"]}
    # and back again: garage's newer report wins
    g = merge_reports(
        [report("garage", 10, "A", "B"), report("attic", 30, "B"), report("garage", 40, "A", "B")]
    )
    assert layout(g) == {"attic": [], "garage": ["A", "B"]}


def test_equal_moments_are_broken_by_machine_name() -> None:
    f = merge_reports([report("b", 10, "X"), report("a", 10, "X")])
    assert layout(f) == {"a": [], "b": ["X"]}


def test_equal_moments_of_one_machine_keep_the_larger_report() -> None:
    assert latest_per_machine([report("m", 5, "A"), report("m", 5, "A", "B")])["m"].gpus == (
        gpu("A"),
        gpu("B"),
    )
    assert latest_per_machine([report("m", 5, "A", "B"), report("m", 5, "A")])["m"].gpus == (
        gpu("A"),
        gpu("B"),
    )


def test_control_plane_mark_comes_from_the_report() -> None:
    f = merge_reports([report("cp", 1, "A", control_plane=True), report("w", 1, "B")])
    assert [(m.name, m.control_plane) for m in f.machines] == [("cp", True), ("w", False)]


def test_fleet_lookups() -> None:
    f = merge_reports([report("garage", 1, "A"), report("attic", 1, "B", "C")])
    located = f.locate("C")
    assert located is not None
    assert (located[0].name, located[1].uuid) == ("attic", "C")
    assert f.locate("Z") is None
    assert f.machine("garage") == Machine(name="garage", gpus=(gpu("A"),))
    assert f.machine("nowhere") is None
    assert [g.uuid for _m, g in f.gpus] == ["B", "C", "A"]
    m = f.machine("attic")
    assert m is not None
    assert m.gpu("B") == gpu("B")
    assert m.gpu("A") is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"uuid": " ", "model": "L4", "total_bytes": 1}, "UUID"),
        ({"uuid": "A", "model": "L4", "total_bytes": 0}, "positive"),
    ],
)
def test_gpu_rejects_impossible_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Gpu(**kwargs)  # type: ignore[arg-type]


def test_a_report_listing_a_uuid_twice_is_rejected() -> None:
    with pytest.raises(ValueError, match="from garage lists a GPU UUID twice"):
        report("garage", 1, "A", "A")


def test_machine_rejects_a_duplicate_uuid_and_a_blank_name() -> None:
    with pytest.raises(ValueError, match="twice"):
        Machine(name="m", gpus=(gpu("A"), gpu("A")))
    with pytest.raises(ValueError, match="name"):
        Machine(name=" ")


reports = st.lists(
    st.builds(
        lambda name, seconds, uuids: report(name, seconds, *uuids),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 5),
        st.lists(st.sampled_from(["U1", "U2", "U3", "U4"]), unique=True),
    ),
    max_size=12,
)


@given(reports, st.randoms(use_true_random=False))
def test_merge_never_depends_on_arrival_order(rs: list[AgentReport], rnd: object) -> None:
    shuffled = list(rs)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert merge_reports(rs) == merge_reports(shuffled)


def newest_by_brute_force(rs: list[AgentReport]) -> dict[str, AgentReport]:
    """The oracle, without latest_per_machine: per machine, among the reports of the latest
    moment, the one naming the most-sorting set of cards (the documented tie rule)."""
    out = {}
    for machine in {r.machine for r in rs}:
        mine = [r for r in rs if r.machine == machine]
        top = max(r.reported_at for r in mine)
        tied = [r for r in mine if r.reported_at == top]
        out[machine] = max(tied, key=lambda r: sorted(g.uuid for g in r.gpus))
    return out


@given(reports)
def test_each_uuid_lives_on_the_machine_of_its_newest_report(rs: list[AgentReport]) -> None:
    f = merge_reports(rs)
    latest = newest_by_brute_force(rs)
    assert sorted(m.name for m in f.machines) == sorted(latest)
    seen = [g.uuid for _m, g in f.gpus]
    assert len(seen) == len(set(seen))  # a card is in one place
    for uuid in {g.uuid for r in latest.values() for g in r.gpus}:
        claims = [
            (r.reported_at, r.machine) for r in latest.values() if uuid in {g.uuid for g in r.gpus}
        ]
        located = f.locate(uuid)
        assert located is not None
        assert located[0].name == max(claims)[1]


def test_a_reading_makes_the_agent_report_of_its_cards() -> None:
    from nodeau.domain.hardware import GpuReading, MachineReading

    reading = MachineReading(
        machine="garage",
        gpus=(GpuReading(gpu=gpu("A"), free_bytes=5, driver_version="580.1"),),
        simulated=False,
        note="1 card",
    )
    assert reading.as_report(at(3), control_plane=True) == AgentReport(
        machine="garage", reported_at=at(3), gpus=(gpu("A"),), control_plane=True
    )
    assert reading.as_report(at(4)).control_plane is False
