"""``run`` on a name that serves, with flags, on the one-machine plane (contract-checked
fakes, as in test_machine_plane): a flag that differs is refused and nothing changes; one
left out keeps what it runs with, the endpoint's origins included."""

from __future__ import annotations

from pathlib import Path

import pytest
from attrs import evolve

from nodeau.apps.serving.commands import RunOutcome, Started
from nodeau.domain.runs import Asked
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.state import StateError
from tests.support.fakes.machine_plane import ask, plane_with

ORIGIN = "https://app.example"


def brought_back(outcome: RunOutcome) -> bool:
    return isinstance(outcome, Started) and outcome.already


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        (Asked(context_tokens=2048), "with --context 512, not --context 2048 as asked"),
        (Asked(task=Task.EMBED), "with --task chat, not --task embed as asked"),
        (Asked(on_cpu=True), "with no --cpu, not --cpu as asked"),
        (
            Asked(recovery=RecoveryMode.AUTOMATIC),
            "with --recovery never, not --recovery automatic --after 3m as asked",
        ),
    ],
)
def test_a_flag_that_differs_is_refused_and_nothing_changes(
    tmp_path: Path, asked: Asked, said: str
) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    before = parts.state.snapshot()
    with pytest.raises(StateError) as refused:
        plane.serving.run(evolve(ask(context=asked.context_tokens), asked=asked))
    assert refused.value.one_line().startswith(f"tiny already serves {said}, and nothing")
    assert parts.state.snapshot() == before
    assert len(parts.runtime.started) == 1
    assert parts.endpoints.running == {"tiny": 18001}


def test_flags_left_out_or_the_same_bring_the_endpoint_back(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    plane.serving.stop("tiny", workload=False)
    again = plane.serving.run(evolve(ask(context=None), asked=Asked()))
    assert isinstance(again, Started) and again.already
    plane.serving.stop("tiny", workload=False)
    same = plane.serving.run(evolve(ask(), asked=Asked(context_tokens=512, task=Task.CHAT)))
    assert isinstance(same, Started) and same.already
    assert len(parts.runtime.started) == 1


def test_origins_change_only_when_the_endpoint_starts_and_are_kept_otherwise(
    tmp_path: Path,
) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    with pytest.raises(StateError, match=r"with no --allow-origin, not --allow-origin https://"):
        plane.serving.run(evolve(ask(), allowed_origins=(ORIGIN,)))
    assert parts.endpoints.origins == {"tiny": ()}

    plane.serving.stop("tiny", workload=False)  # a stopped endpoint starts with the origins asked
    assert brought_back(plane.serving.run(evolve(ask(), allowed_origins=(ORIGIN,))))
    assert parts.endpoints.origins == {"tiny": (ORIGIN,)}

    plane.serving.stop("tiny", workload=False)  # left out: as it is
    assert brought_back(plane.serving.run(ask()))
    assert parts.endpoints.origins == {"tiny": (ORIGIN,)}
