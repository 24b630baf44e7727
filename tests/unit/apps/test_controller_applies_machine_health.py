"""Machine health in the fleet's controller (apps/controller/health.py), at its edges: the
policy given is the one assessed by, the log says only the machines whose state changed,
and every workload whose machine calls for it is held or resumed in one pass, whatever
comes before it (a machine not assessed, a workload nothing happens to)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodeau.apps.controller.health import apply_health
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.health import Health, MachineHealth, Signal
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, WorkloadState
from tests.support.fakes.controller_fleet import state
from tests.support.fakes.fleet_stories import Story

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = WorkloadState


def health(state: Health, sentence: str) -> MachineHealth:
    quiet = (
        frozenset({Signal.NODE_HEARTBEAT, Signal.AGENT_REPORT})
        if state is Health.UNREACHABLE
        else frozenset()
    )
    since = NOW if state is Health.UNREACHABLE else None
    return MachineHealth(state=state, since=since, quiet=quiet, sentence=sentence)


def never(story: Story, name: str) -> None:
    story.cluster.objects.create(
        WorkloadAsk(
            kind=WorkloadKind.SERVICE,
            name=name,
            model="qwen",
            recovery=RecoveryMode.NEVER,
            recovery_after=timedelta(minutes=1),
        )
    )


def two_services() -> Story:
    """ "a" serving on m1, then "b" on m2, both set never to recover."""
    story = Story("m1", "m2")
    never(story, "a")
    story.tick()
    never(story, "b")
    story.tick()
    story.cluster.pods.run()
    story.tick()
    assert (story.machine_of("a"), story.machine_of("b")) == ("m1", "m2")
    assert [r.workload.name for r in story.cluster.store.snapshot().workloads] == ["a", "b"]
    return story


def test_a_workload_after_one_its_machine_leaves_alone_is_held_and_resumed_and_said_so() -> None:
    story = two_services()
    story.off_the_network("m2")
    story.run_for(60)
    assert story.health("m2") is Health.UNREACHABLE
    assert (state(story.cluster, "a"), state(story.cluster, "b")) == (S.SERVING, S.HELD)
    sentence = story.cluster.health.read()["m2"].sentence
    assert f"b: held ({sentence})" in story.lines

    story.back("m2")
    story.tick()
    assert state(story.cluster, "b") is S.SERVING  # starting, then its server still answers
    assert f"b: starting ({story.cluster.health.read()['m2'].sentence})" in story.lines


def test_a_workload_after_one_on_a_machine_not_assessed_is_still_held() -> None:
    story = two_services()
    lines: list[str] = []
    gone = health(Health.UNREACHABLE, "m2 stopped answering")
    records = story.cluster.store.snapshot().workloads
    apply_health(story.cluster.store, {"m2": gone}, NOW, lines.append, records)
    assert (state(story.cluster, "a"), state(story.cluster, "b")) == (S.SERVING, S.HELD)
    assert lines == ["b: held (m2 stopped answering)"]
