"""Events written beside the controller's work (adapters/kube/events.py ``Sending``), on a real
API server: each workload's Events are recorded in the order they were sent, ``flush``
returns once all are written, and an Event the API server refuses is one log line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client

from nodeau.adapters.kube import events
from nodeau.adapters.kube.events import Sending

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_each_workloads_events_are_recorded_in_the_order_sent(
    fresh_fleet: client.ApiClient,
) -> None:
    lines: list[str] = []
    sending = Sending(fresh_fleet, lanes=3, log=lines.append)
    workloads = ("chat", "embed", "rerank", "vision")
    for i in range(10):
        for w in workloads:
            events.record(
                fresh_fleet,
                workload=w,
                involved=None,
                reason="Note",
                message=f"{w} step {i}",
                at=AT + timedelta(seconds=i),
                identity="sending",
                sending=sending,
            )
    sending.flush()
    for w in workloads:
        said = [e.text for e in events.read(fresh_fleet, w)]  # in the order recorded
        assert said == [f"{w} step {i}" for i in range(10)]
    assert lines == []


def test_an_event_the_api_server_refuses_is_a_log_line_and_the_rest_are_written(
    fresh_fleet: client.ApiClient,
) -> None:
    lines: list[str] = []
    sending = Sending(fresh_fleet, lanes=1, log=lines.append)
    sending.send("bad", {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "Bad_Name"}})
    events.record(
        fresh_fleet,
        workload="chat",
        involved=None,
        reason="Note",
        message="written after the refused one",
        at=AT,
        identity="sending",
        sending=sending,
    )
    sending.flush()
    assert [e.text for e in events.read(fresh_fleet, "chat")] == ["written after the refused one"]
    assert len(lines) == 1
    assert lines[0].startswith(
        'an Event about bad was not recorded: the Kubernetes API answered 422: Event "Bad_Name" '
        "is invalid"
    )


def test_events_sent_while_held_are_written_once_the_hold_ends_in_the_order_sent(
    fresh_fleet: client.ApiClient,
) -> None:
    lines: list[str] = []
    sending = Sending(fresh_fleet, lanes=2, log=lines.append)

    def note(workload: str, message: str) -> None:
        events.record(
            fresh_fleet, workload=workload, involved=None, reason="Note", message=message,
            at=AT, identity="sending", sending=sending,
        )  # fmt: skip

    with sending.held():
        for i in range(5):
            note("chat", f"decided {i}")
        with sending.held():  # holds nest: the outer one ends them
            note("embed", "decided")
        sending.flush()  # waits for nothing held
        assert events.read(fresh_fleet, "chat") == ()
        assert events.read(fresh_fleet, "embed") == ()
    note("chat", "after the hold")
    sending.flush()
    said = [e.text for e in events.read(fresh_fleet, "chat")]
    assert said == [*(f"decided {i}" for i in range(5)), "after the hold"]
    assert [e.text for e in events.read(fresh_fleet, "embed")] == ["decided"]
    assert lines == []
