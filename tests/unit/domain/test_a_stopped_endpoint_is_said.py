"""A service whose endpoint is stopped is said so by ``nodeau ps`` (domain/workloads.py
``endpoint_stopped``): its state stays (the model is loaded), its sentence names what
brings the endpoint back, and one being restarted says nothing restarts it meanwhile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve

from nodeau.domain.workloads import (
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
    endpoint_stopped,
    ps_sentence,
)

SINCE = datetime(2026, 3, 1, 9, 30, 5, tzinfo=UTC)
NOW = SINCE + timedelta(minutes=4)


def service(state: WorkloadState = WorkloadState.SERVING) -> Workload:
    return Workload(
        name="tiny",
        kind=WorkloadKind.SERVICE,
        model="tiny",
        artifact_id="ab" * 32,
        machine="m1",
        gpu_uuid="GPU-1a2b3c4d-0000",
        state=state,
        since=SINCE,
    )


def test_a_serving_service_with_its_endpoint_stopped_says_it_is_loaded_and_how_back() -> None:
    shown = endpoint_stopped(service())
    assert shown.state is WorkloadState.SERVING
    assert ps_sentence(shown, NOW) == (
        "serving on m1 (GPU-1a2b…) since 09:30:05 (4m); "
        "loaded, endpoint stopped; nodeau run tiny brings it back"
    )
    assert ps_sentence(service(), NOW).endswith("; nothing to do")


def test_a_restarting_service_with_its_endpoint_stopped_says_nothing_restarts_it() -> None:
    ended = ServerExit.exited(1, SINCE)
    restarting = evolve(
        service(),
        state=WorkloadState.RESTARTING,
        last_exit=ended,
        next_attempt=SINCE + timedelta(seconds=10),
    )
    said = ps_sentence(endpoint_stopped(restarting), NOW)
    assert said == (
        "restarting on m1 (GPU-1a2b…) since 09:30:05 (4m): its model server exited with "
        "code 1 at 09:30:05; its endpoint is stopped, so nothing restarts it; nodeau run "
        "tiny brings the endpoint back, which starts the model server again"
    )
    assert "next attempt" in ps_sentence(restarting, NOW)


@pytest.mark.parametrize("state", [WorkloadState.ADMITTED, WorkloadState.STARTING])
def test_a_service_not_loaded_yet_is_shown_as_it_is(state: WorkloadState) -> None:
    assert endpoint_stopped(service(state)) == service(state)


def test_a_batch_job_has_no_endpoint_and_is_shown_as_it_is() -> None:
    job = evolve(service(WorkloadState.STARTING), kind=WorkloadKind.BATCH)
    job = evolve(job, state=WorkloadState.RUNNING)
    assert endpoint_stopped(job) == job
