"""A model server of a workload that holds its card is that workload's, even in the moment
between a restart's spawn and its record naming the new pid (``MachinePlane``): ``ps`` never
lists it twice and admission is not refused for it; a server no record names still is."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeau.adapters import server_search
from nodeau.ports.runtime import RunningServer
from nodeau.ports.state import StateError
from tests.support.fakes.machine_plane import ask, plane_with


def server(pid: int) -> RunningServer:
    return RunningServer(
        pid=pid, port=40000 + pid, started_at=datetime(2026, 12, 3, tzinfo=UTC), command=()
    )


def test_a_new_server_of_a_held_workload_is_no_stranger_and_another_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plane, parts = plane_with(tmp_path, cards="2 x 24 GiB")
    plane.serving.run(ask())
    running: list[tuple[str, RunningServer]] = [("tiny", server(9001))]  # its restart, spawned
    monkeypatch.setattr(server_search, "under", lambda _root: tuple(running))
    monkeypatch.setattr(parts.runtime, "under", lambda _root: tuple(running), raising=False)
    assert [w.name for w in plane.serving.workloads()] == ["tiny"]
    plane.serving.run(ask(name="second"))  # admitted: nothing runs that no record accounts for

    running.append(("ghost", server(9002)))  # a server of a workload no record holds
    assert [w.name for w in plane.serving.workloads()] == ["tiny", "second", "ghost"]
    with pytest.raises(StateError, match=r"does not name: ghost \(pid 9002\)"):
        plane.serving.run(ask(name="third"))
