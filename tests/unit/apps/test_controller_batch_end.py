"""A batch job's end on the fleet, through the controller, its results kept in the cluster.

Counts in status, the end the domain says, the Pod deleted (forced if its machine is quiet), the
card released once it is gone, the Event word for word. Results are an in-memory ``FleetBatches``
(tests/kube/test_batch_fleet.py proves ``KubeFleetBatches``); a stop is ``spec.stop: true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import evolve

from nodeau.apps.controller.loop import Controller
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.batches import BatchRequest
from nodeau.domain.health import Health
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.workload_objects import WorkloadObject
from tests.support.fakes.controller_fleet import SERVICE, LingeringPods, held_cards, state
from tests.support.fakes.fake_cluster import (
    FakeCluster,
    FakeServerPods,
    FakeWorkloadObjects,
    gpu_uuid,
)
from tests.support.fakes.fleet_stories import Story

BATCH = WorkloadKind.BATCH
S = WorkloadState


class KeptResults:
    """``FleetBatches`` in a dict: each job's result lines, in the order written."""

    def __init__(self) -> None:
        self.kept: dict[str, list[dict[str, Any]]] = {}
        self.asked: list[str] = []  # the names each ``lines`` call asked for

    def lines(self, job: str) -> tuple[dict[str, Any], ...]:
        self.asked.append(job)
        return tuple(self.kept.get(job, ()))

    def append(self, job: str, line: Mapping[str, Any]) -> None:
        self.kept.setdefault(job, []).append(dict(line))

    def ask_stop(self, job: str) -> bool:
        return False

    def where(self, job: str) -> str:
        return f"the kept results of {job}"


class StoppableObjects(FakeWorkloadObjects):
    """The fake's objects, whose spec says ``stop: true`` for the jobs in ``stopping``."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(cluster)
        self.stopping: set[str] = set()

    def _view(self, key: tuple[WorkloadKind, str]) -> WorkloadObject:
        seen = super()._view(key)
        if key[1] not in self.stopping:
            return seen
        return evolve(seen, spec={**seen.spec, "stop": True})


class JobStory(Story):
    """A Story whose controller keeps batch results (``results``) and reads stops."""

    def __init__(self, *machines: str) -> None:
        super().__init__(*machines)
        self.results = KeptResults()
        self.objects = StoppableObjects(self.cluster)
        self.cluster.objects = self.objects
        self.use_pods(self.cluster.pods)

    def use_pods(self, pods: FakeServerPods) -> None:
        """The controller, on these servers (and the results kept)."""
        self.cluster.pods = pods
        ports = evolve(self.cluster.controller_ports(), batches=self.results)
        self.ctl = Controller(ports, clock=self.clock, log=self.lines.append)

    def submit(self, name: str = "nightly", requests: int = 3) -> None:
        """A job of ``requests`` requests, admitted and running on its server."""
        asks = tuple(
            BatchRequest(
                line_no=i + 1, custom_id=f"r{i}", url="/v1/chat/completions", body={"n": i}
            )
            for i in range(requests)
        )
        self.cluster.objects.create(WorkloadAsk(kind=BATCH, name=name, model="qwen", requests=asks))
        self.tick()
        self.cluster.pods.run()
        self.tick()
        assert state(self.cluster, name) is S.RUNNING

    def answer(self, custom_id: str, status: int = 200, name: str = "nightly") -> None:
        response = {"status_code": status, "body": {"ok": status < 400}}
        line = {"id": f"batch_req_{custom_id}", "custom_id": custom_id, "response": response}
        self.results.append(name, {**line, "error": None})

    def status(self, name: str = "nightly") -> tuple[object, object, object]:
        obj = self.cluster.objects.get(BATCH, name)
        assert obj is not None
        return obj.status.get("total"), obj.status.get("completed"), obj.status.get("failed")

    def said(self, name: str = "nightly") -> list[tuple[str, str]]:
        return [(s.reason, s.message) for s in self.cluster.events.said if s.workload == name]


def test_a_running_jobs_counts_are_shown_and_it_runs_on_until_every_request_has_a_result() -> None:
    story = JobStory("m1")
    story.submit()
    assert story.status() == (3, 0, 0)
    assert story.results.asked[-1] == "nightly"

    story.answer("r0")
    story.answer("r1", status=500)
    story.results.append("nightly", {"not": "a result"})  # a line that is no result: skipped
    story.results.append("nightly", {"custom_id": "elsewhere", "response": None})  # not ours
    story.tick()
    assert story.status() == (3, 1, 1)
    assert state(story.cluster, "nightly") is S.RUNNING
    assert held_cards(story.cluster) == [("nightly", gpu_uuid("m1", 0))]
    assert (BATCH, "nightly") in story.cluster.pods.pods


def test_a_job_whose_every_request_has_a_result_succeeds_its_pod_goes_and_its_card_frees() -> None:
    story = JobStory("m1")
    story.submit()
    for i in range(3):
        story.answer(f"r{i}", status=200 if i < 2 else 400)
    story.tick()

    assert story.status() == (3, 2, 1)
    assert story.cluster.pods.pods == {}
    assert story.cluster.pods.forced == 0  # its machine answers: an ordinary deletion
    assert story.cluster.ledger.read() == Ledger()
    w = story.cluster.store.snapshot().named("nightly")
    assert w is not None
    assert (w.workload.state, w.workload.since) == (S.SUCCEEDED, story.clock.now)
    assert story.said()[-1] == (
        "Succeeded",
        "every request has its result (2 done, 1 failed of 3); "
        "GPU-m1-00-0000-sim on m1 is free again, the results are kept",
    )
    ended = story.cluster.events.said[-1]
    assert ended.at == story.clock.now
    assert story.lines[-1] == (
        "BatchJob nightly: Succeeded: every request has its result (2 done, 1 failed of 3); "
        "GPU-m1-00-0000-sim on m1 is free again, the results are kept"
    )
    before = len(story.cluster.events.said)
    story.tick()  # ended: nothing more is done or said
    assert len(story.cluster.events.said) == before
    assert state(story.cluster, "nightly") is S.SUCCEEDED


def test_a_job_a_person_stops_is_stopped_with_its_results_so_far_and_its_card_frees() -> None:
    story = JobStory("m1")
    story.submit()
    story.answer("r0")
    story.tick()
    assert state(story.cluster, "nightly") is S.RUNNING

    story.objects.stopping.add("nightly")
    story.tick()
    assert state(story.cluster, "nightly") is S.STOPPED
    assert story.cluster.pods.pods == {}
    assert story.cluster.ledger.read() == Ledger()
    assert story.status() == (3, 1, 0)
    assert story.said()[-1] == (
        "Stopped",
        "stopped (1 done, 0 failed of 3); "
        "GPU-m1-00-0000-sim on m1 is free again, the results are kept",
    )


def test_a_stop_asked_once_every_request_has_its_result_is_a_success() -> None:
    story = JobStory("m1")
    story.submit(requests=1)
    story.answer("r0")
    story.objects.stopping.add("nightly")
    story.tick()
    assert state(story.cluster, "nightly") is S.SUCCEEDED
    assert story.said()[-1][0] == "Succeeded"


def test_an_ended_jobs_card_is_released_only_once_its_pod_is_gone() -> None:
    story = JobStory("m1")
    pods = LingeringPods()
    story.use_pods(pods)
    story.submit(requests=1)
    story.answer("r0")
    story.tick()
    assert pods.leaving == {(BATCH, "nightly")}
    assert held_cards(story.cluster) == [("nightly", gpu_uuid("m1", 0))]
    assert state(story.cluster, "nightly") is S.RUNNING
    assert "Succeeded" not in [reason for reason, _ in story.said()]

    pods.leave()
    story.tick()
    assert state(story.cluster, "nightly") is S.SUCCEEDED
    assert story.cluster.ledger.read() == Ledger()


def test_an_ended_job_on_a_machine_that_does_not_answer_has_its_pod_taken_out_forced() -> None:
    story = JobStory("m1")
    story.submit(requests=1)
    story.off_the_network("m1")
    story.run_for(60)
    assert story.health("m1") is Health.UNREACHABLE
    assert state(story.cluster, "nightly") is S.HELD  # a batch job waits for its machine

    story.answer("r0")  # its last result was kept before the machine went quiet
    story.tick()
    assert story.cluster.pods.forced == 1
    assert story.cluster.pods.pods == {}
    assert state(story.cluster, "nightly") is S.SUCCEEDED
    assert story.cluster.ledger.read() == Ledger()


def test_a_services_server_is_not_read_for_batch_results() -> None:
    story = JobStory("m1")
    story.serve()
    story.tick()
    assert story.results.asked == []
    obj = story.cluster.objects.get(SERVICE, "chat")
    assert obj is not None and "total" not in obj.status
    assert state(story.cluster, "chat") is S.SERVING


class KilledOnDelete(LingeringPods):
    """Servers whose container is killed when their Pod is deleted (it exits failed, as a
    terminated process does) while the Pod itself stays until its machine lets it go."""

    def delete(self, kind: WorkloadKind, workload: str, *, force: bool = False) -> bool:
        if (kind, workload) in self.pods:
            self.end(kind, workload, ok=False)
        return super().delete(kind, workload, force=force)


def test_a_stopped_jobs_server_killed_while_its_pod_goes_leaves_the_job_stopped_not_failed() -> (
    None
):
    story = JobStory("m1")
    pods = KilledOnDelete()
    story.use_pods(pods)
    story.submit()
    story.objects.stopping.add("nightly")
    story.tick()  # its Pod deleted; the server exits failed; the Pod is still there
    story.tick()
    assert state(story.cluster, "nightly") is S.RUNNING
    assert held_cards(story.cluster) == [("nightly", gpu_uuid("m1", 0))]

    pods.leave()
    story.tick()
    assert state(story.cluster, "nightly") is S.STOPPED
    assert [reason for reason, _ in story.said()][-1] == "Stopped"


def test_counts_that_did_not_change_are_not_written_again() -> None:
    story = JobStory("m1")
    story.submit()
    story.answer("r0")
    story.tick()
    assert story.status() == (3, 1, 0)
    written = story.cluster.objects.stored[BATCH, "nightly"].version
    story.tick()
    story.tick()
    assert story.cluster.objects.stored[BATCH, "nightly"].version == written
