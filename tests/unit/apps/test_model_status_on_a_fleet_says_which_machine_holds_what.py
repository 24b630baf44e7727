"""``nodeau model status`` on a fleet (``KubernetesPlane.model_status`` over the contract-
checked fake cluster): every machine's verified copies as its agent reported them, and the
copies its agent is fetching, verifying or failed to make, downloaded and verified apart."""

from __future__ import annotations

from datetime import timedelta

from attrs import evolve

from nodeau.apps.planes.status_rows import fleet_status_rows
from nodeau.domain.cache import CopyState
from nodeau.domain.copies import CopyPhase, CopyProgress
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.controller_fleet import HUGE, SMALL, START, fleet, fleet_plane
from tests.support.fakes.fake_cluster import GIB, machine_report, verified


def test_every_machine_says_what_it_holds_verified() -> None:
    cluster = fleet("m1", "m2")
    rows = fleet_plane(cluster).model_status()
    assert [(r.machine, r.names, r.sha256) for r in rows] == [
        ("m1", ("qwen",), SMALL),
        ("m1", ("giant",), HUGE),
        ("m2", ("qwen",), SMALL),
        ("m2", ("giant",), HUGE),
    ]
    assert {(r.downloaded, r.state) for r in rows} == {("yes", CopyState.VERIFIED)}
    assert {r.verified for r in rows} == {f"yes (reported {START:%Y-%m-%d %H:%M} UTC)"}


def test_a_copy_under_way_shows_its_bytes_and_is_not_verified() -> None:
    cluster = fleet("m1")
    small = verified("m1", SUMMARY, sha=SMALL, name="qwen", gib=4)
    other = "12" * 32
    copies = (
        CopyProgress(
            artifact=other, since=START, phase=CopyPhase.FETCHING,
            bytes_done=GIB, bytes_total=4 * GIB,
        ),
        CopyProgress(artifact="34" * 32, since=START, phase=CopyPhase.FAILED, reason="404"),
        CopyProgress(artifact="56" * 32, since=START, phase=CopyPhase.WAITING),
        CopyProgress(artifact=SMALL, since=START, phase=CopyPhase.VERIFYING),  # done: listed once
    )  # fmt: skip
    report = evolve(machine_report("m1", 1, small, at=START + timedelta(minutes=1)), copies=copies)
    cluster.reports.publish(report)
    rows = {r.sha256: r for r in fleet_plane(cluster).model_status()}
    assert set(rows) == {SMALL, other, "34" * 32}
    fetching = rows[other]
    assert (fetching.downloaded, fetching.verified, fetching.state) == (
        "partial (25%)", "no", CopyState.PARTIAL,
    )  # fmt: skip
    assert rows["34" * 32].verified == "no (failed: 404)"
    assert rows[SMALL].state is CopyState.VERIFIED


def test_a_verifying_copy_is_downloaded_and_says_it_is_being_checked() -> None:
    copy = CopyProgress(
        artifact="12" * 32, since=START, phase=CopyPhase.VERIFYING,
        bytes_done=2 * GIB, bytes_total=2 * GIB,
    )  # fmt: skip
    [row] = fleet_status_rows([evolve(machine_report("m9", 1, at=START), copies=(copy,))])
    assert (row.machine, row.downloaded, row.verified) == ("m9", "yes", "no (verifying now)")
