"""The dashboard on a fleet on a real API server: ``nodeau dashboard`` on a joined machine
reads the fleet through the same plane as the CLI, says what ``ps``, ``fleet list``,
``models copies``, ``recovery status`` and ``plan`` say, and its one action asks the
BatchJob to stop as ``nodeau batch stop`` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from nodeau.domain.workloads import WorkloadKind
from tests.support.real.cli import Cli
from tests.support.real.dashboard_cli import same_moment, whole_board, without
from tests.support.real.kube_nodes import wait_for
from tests.support.real.kube_objects import decide_as_the_controller, finished, started, the_object


def test_the_dashboard_reads_the_fleet_and_stops_a_batch_job_there(
    fleet: Cli,
    fresh_fleet: client.ApiClient,
    tmp_path: Path,
) -> None:
    line = {
        "custom_id": "q1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    }
    file = tmp_path / "job.jsonl"
    file.write_text(json.dumps(line) + "\n", encoding="utf-8")
    running = started(
        fleet, "batch", "submit", str(file), "--model", "m", "--unproved", "--name", "job", "--json"
    )
    wait_for(lambda: the_object(fresh_fleet, WorkloadKind.BATCH, "job") is not None, "a BatchJob")
    decide_as_the_controller(fresh_fleet, WorkloadKind.BATCH, "job")
    finished(running)

    opened: dict[str, Any] = fleet.json("dashboard")
    bearer = {"Authorization": f"Bearer {opened['token']}", "Cache-Control": "no-cache"}
    try:
        with httpx.Client(base_url=opened["address"], timeout=60, trust_env=False) as web:
            board, ps = same_moment(
                lambda: whole_board(web, bearer),
                lambda: fleet.json("ps"),
                lambda board: board["cli"]["ps"],
            )
            assert board["plane"].startswith("fleet on Kubernetes")
            assert [(r["name"], r["kind"]) for r in ps] == [("job", "batch")]
            assert board["cli"]["fleet_list"] == fleet.json("fleet", "list")
            assert board["cli"]["models_copies"] == fleet.json("models", "copies")
            assert board["cli"]["recovery_status"] == fleet.json("recovery", "status")
            assert without(board["cli"]["plan"], "clock", "clock_anchor") == without(
                fleet.json("plan"), "clock", "clock_anchor"
            )
            [m1] = board["hardware"]["machines"]
            assert m1["machine"] == "m1"
            assert board["batches"]["stoppable"] == ["job"]

            csrf = web.get("/api/session", headers=bearer).json()["csrf"]
            stop = web.post("/api/batches/job/stop", headers={**bearer, "X-Nodeau-CSRF": csrf})
            assert stop.status_code == 200, stop.text
            # no controller runs here: the stop is asked (spec.stop), as nodeau batch stop asks
            assert stop.json()["sentence"].startswith("job: asked to stop; 0 results kept")
            asked = the_object(fresh_fleet, WorkloadKind.BATCH, "job")
            assert asked is not None and asked["spec"]["stop"] is True
    finally:
        fleet("dashboard", "--stop")
