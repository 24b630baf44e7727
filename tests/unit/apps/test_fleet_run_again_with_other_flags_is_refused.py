"""On a fleet too, ``run`` on a name that serves with flags other than it runs with is
refused and changes nothing; flags left out bring it back as it is (the Kubernetes plane
over the controller's fakes)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodeau.apps.serving.commands import RunAsk, Started
from nodeau.domain.runs import Asked
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from nodeau.ports.state import StateError
from tests.support.fakes.controller_fleet import fleet_plane, serving_chat


def again(asked: Asked) -> RunAsk:
    return RunAsk(
        model="qwen",
        name="chat",
        task=asked.task or Task.CHAT,
        context_tokens=asked.context_tokens,
        recovery=asked.recovery or RecoveryMode.NEVER,
        recovery_after=asked.recovery_after or timedelta(minutes=3),
        wait_s=0,
        asked=asked,
    )


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        (Asked(context_tokens=2048), "not --context 2048 as asked"),
        (Asked(task=Task.EMBED), "with --task chat, not --task embed as asked"),
        (
            Asked(recovery=RecoveryMode.AUTOMATIC),
            "with --recovery never, not --recovery automatic --after 3m as asked",
        ),
    ],
)
def test_a_flag_that_differs_is_refused_on_the_fleet(asked: Asked, said: str) -> None:
    cluster, _clock, _ctl = serving_chat()
    plane = fleet_plane(cluster)
    before = cluster.objects.get(WorkloadKind.SERVICE, "chat")
    with pytest.raises(StateError) as refused:
        plane.serving.run(again(asked))
    line = refused.value.one_line()
    assert line.startswith("chat already serves with ") and said in line
    assert "and nothing was changed" in line
    assert cluster.objects.get(WorkloadKind.SERVICE, "chat") == before


def test_flags_left_out_bring_it_back_as_it_is_on_the_fleet() -> None:
    cluster, _clock, _ctl = serving_chat()
    plane = fleet_plane(cluster)
    record = cluster.store.snapshot().named("chat")
    assert record is not None
    same = Asked(context_tokens=record.config.context_tokens, task=Task.CHAT)
    for asked in (Asked(), same):
        assert isinstance(plane.serving.run(again(asked)), Started)
