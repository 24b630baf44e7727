"""The dashboard's board and alerts: read from the views the CLI prints, with the CLI's own
rows, a missing figure shown as "unknown", an unreadable section said in one line."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from nodeau.apps.batches.commands import BatchView
from nodeau.apps.cli import batch, ps_command, recovery
from nodeau.apps.cli.plan import plan_lines
from nodeau.apps.cli.render import to_json
from nodeau.apps.copies.commands import CopyListing, CopyView
from nodeau.apps.dashboard.alerts import Alert, alerts
from nodeau.apps.dashboard.board import read_board
from nodeau.apps.planes.plane import Plane
from nodeau.apps.planes.status_rows import StatusRow
from nodeau.apps.recovery.commands import RecoveryListing, RecoveryView
from nodeau.domain.cache import CopyState
from nodeau.ports.errors import NodeauError
from tests.support.builders.dashboard_views import NOW, FakePlane, fleet, machine, plan, workload


def copy_view(state: str) -> CopyView:
    return CopyView(
        machine="box-b",
        model="tiny",
        artifact="ab" * 32,
        state=state,
        sentence=f"the copy is {state}: because",
        bytes_done=None,
        bytes_total=None,
        asked_by=("person",),
        requested_at=NOW,
        reported_at=None,
    )


def status_row(state: CopyState, verified: str = "NO: wrong bytes") -> StatusRow:
    return StatusRow(
        machine="box-a",
        names=("tiny",),
        sha256="cd" * 32,
        size_bytes=1000,
        bytes_present=1000,
        downloaded="yes",
        verified=verified,
        state=state,
    )


def board_of(**views: Any) -> dict[str, Any]:
    given: dict[str, Any] = {
        "machines": fleet(machine("box-a")),
        "workloads": (),
        "batches": (),
        "copies": CopyListing(plane="a fake plane", copies=()),
        "recovery": RecoveryListing(plane="a fake plane", control_plane="none", services=()),
        "plan": plan(),
        **views,
    }
    rows = given.pop("files", ())

    def files() -> tuple[StatusRow, ...]:
        if isinstance(rows, Exception):
            raise rows
        return cast(tuple[StatusRow, ...], rows)

    # as the page gets it: through JSON
    return cast(
        dict[str, Any],
        json.loads(json.dumps(read_board(cast(Plane, FakePlane(**given)), files, NOW))),
    )


# -- alerts


@pytest.mark.parametrize(
    ("health", "expected"),
    [
        ("reporting", []),
        ("upgrading", []),
        ("degraded", [("machine-degraded", "warning")]),
        ("unreachable", [("machine-unreachable", "error")]),
    ],
)
def test_a_machine_alerts_when_degraded_or_unreachable(
    health: str, expected: list[tuple[str, str]]
) -> None:
    found = alerts(
        machines=fleet(machine("m", health)), workloads=(), copies=None, files=None, plan=None
    )
    assert [(a.kind, a.severity) for a in found] == expected
    for a in found:
        assert (a.subject, a.sentence) == ("m", f"m is {health}: its agent is quiet")


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("serving", None),
        ("running", None),
        ("starting", None),
        ("recovering", None),
        ("held", ("workload-held", "error")),
        ("exited", ("workload-exited", "error")),
        ("restarting", ("workload-restarting", "warning")),
    ],
)
def test_a_workload_alerts_with_its_ps_sentence(
    state: str, expected: tuple[str, str] | None
) -> None:
    view = workload("w", state)
    found = alerts(machines=None, workloads=(view,), copies=None, files=None, plan=None)
    if expected is None:
        assert found == ()
    else:
        assert found == (
            Alert(kind=expected[0], severity=expected[1], subject="w", sentence=view.sentence),
        )


def test_a_failed_copy_and_a_mismatched_file_alert_and_nothing_else_does() -> None:
    copies = CopyListing(
        plane="p", copies=tuple(copy_view(s) for s in ("ready", "fetching", "failed"))
    )
    files = (
        status_row(CopyState.VERIFIED, "yes (2026-11-30 12:00 UTC)"),
        status_row(CopyState.MISMATCH),
    )
    found = alerts(machines=None, workloads=None, copies=copies, files=files, plan=None)
    assert [(a.kind, a.subject) for a in found] == [
        ("copy-failed", "box-b/tiny"),
        ("verification-mismatch", "box-a/tiny"),
    ]
    assert found[0].sentence == "the copy is failed: because"
    assert "NO: wrong bytes" in found[1].sentence


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),  # no entitlement: the Home plan, nothing wrong
        ({"accepted": True, "reason": "accepted", "plan": "pro"}, []),
        (
            {"accepted": True, "reason": "accepted", "plan": "pro", "warning": "expires in 3 days"},
            [("entitlement-expiring", "warning", "expires in 3 days")],
        ),
        (
            {
                "reason": "expired",
                "sentence": "The Home plan applies: the Pro entitlement expired.",
            },
            [
                (
                    "entitlement-expired",
                    "error",
                    "The Home plan applies: the Pro entitlement expired.",
                )
            ],
        ),
        (
            {"accepted": True, "reason": "accepted", "clock_moved_back": True, "sentence": "s"},
            [("entitlement-clock-moved-back", "error", "s")],
        ),
    ],
)
def test_the_plan_alerts_when_it_is_about_to_expire_or_was_not_accepted(
    changes: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    found = alerts(machines=None, workloads=None, copies=None, files=None, plan=plan(**changes))
    assert [(a.kind, a.severity, a.sentence) for a in found] == expected


def test_errors_come_before_warnings() -> None:
    found = alerts(
        machines=fleet(machine("m1", "degraded"), machine("m2", "unreachable")),
        workloads=(workload("w1", "restarting"), workload("w2", "held")),
        copies=None,
        files=None,
        plan=None,
    )
    assert [a.subject for a in found] == ["m2", "w2", "m1", "w1"]


# -- the board


def test_the_board_shows_the_cli_rows_and_the_cli_json() -> None:
    views = (workload("chat"), workload("job", "running", "batch", endpoint=None))
    job = BatchView(
        name="job", model="tiny", state="running", sentence="running: 3 of 10", total=10,
        done=3, failed=0, left=7, bad_lines=1, results="/r",
    )  # fmt: skip
    done = BatchView(
        name="old", model="tiny", state="succeeded", sentence="succeeded", total=1,
        done=1, failed=0, left=0, bad_lines=0, results="/r",
    )  # fmt: skip
    services = (
        RecoveryView(
            name="chat", machine="box-a", state="serving", choice="never", mode="never",
            after_seconds=180, copies=None, last_recovery=None, sentence=None, note=None,
        ),
    )  # fmt: skip
    listing = RecoveryListing(plane="p", control_plane="c", services=services)
    board = board_of(workloads=views, batches=(job, done), recovery=listing)
    assert board["workloads"]["headers"] == list(ps_command.HEADERS)
    assert board["workloads"]["rows"] == [list(ps_command.row(v)) for v in views]
    assert board["batches"]["rows"] == [list(batch.status_row(b)) for b in (job, done)]
    assert board["batches"]["stoppable"] == ["job"]
    assert board["recovery"]["rows"] == [list(recovery.row(services[0]))]
    # the lines recovery status prints after its table (the table is sent as its rows)
    assert board["recovery"]["lines"] == recovery.status_lines(listing)[3:]
    assert board["workloads"]["targets"] == ["chat"]  # serving, with an endpoint
    assert board["plan"]["lines"] == plan_lines(plan())
    assert board["cli"]["ps"] == json.loads(to_json(views))
    assert board["cli"]["fleet_list"] == json.loads(to_json(fleet(machine("box-a"))))
    gpus = board["hardware"]["machines"][0]["gpus"]["rows"]
    assert gpus == [
        ["GPU-1", "L4", "24.00 GiB", "chat", "3.00 GiB"],
        ["GPU-2", "L4", "24.00 GiB", "free", "-"],
    ]
    assert board["notes"] == {}
    assert board["alerts"] == []


def test_missing_figures_read_unknown_and_never_fail_the_board() -> None:
    silent = machine(
        "box-q", "unreachable", simulated=None, reported_at=None, health_sentence=None, gpus=()
    )
    board = board_of(
        machines=fleet(silent), workloads=(workload("w", machine=None, gpu=None, since=None),)
    )
    [card] = board["hardware"]["machines"]
    facts = dict(card["facts"])
    assert facts["simulated"] == "unknown"
    assert facts["last report"] == "unknown"
    assert card["gpus"]["rows"] == []
    assert board["alerts"][0]["sentence"] == "box-q is unreachable"
    assert board["workloads"]["rows"][0][3:5] == ["-", "-"]  # as ps prints them


def test_a_section_that_cannot_be_read_says_why_and_the_rest_is_shown() -> None:
    board = board_of(
        copies=NodeauError("copies are kept between the machines of a fleet"),
        machines=NodeauError("the cluster did not answer:\n  connection refused"),
        files=RuntimeError("a bug"),
    )
    assert board["copies"] is None and board["hardware"] is None and board["models"] is None
    assert board["notes"] == {
        "copies": "copies are kept between the machines of a fleet",
        "hardware": "the cluster did not answer: connection refused",
        "models": "could not be read (RuntimeError: a bug)",
    }
    assert board["workloads"] is not None and board["plan"] is not None


def test_the_board_reads_the_plan_without_advancing_its_clock_anchor() -> None:
    plane = FakePlane(
        machines=fleet(machine("box-a")), workloads=(), batches=(),
        copies=CopyListing(plane="p", copies=()),
        recovery=RecoveryListing(plane="p", control_plane="none", services=()), plan=plan(),
    )  # fmt: skip
    board = read_board(cast(Plane, plane), lambda: (), NOW)
    assert plane.plan_advanced == [False]
    assert board["plan"]["lines"] == plan_lines(plan())
