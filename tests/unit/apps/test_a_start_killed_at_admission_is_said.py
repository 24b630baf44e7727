"""A ``nodeau run`` killed after its admission, before its model server exists: the
admission names the run as its starter, so ``ps`` says the start was interrupted and how to
free the card, never "it starts once ..." of a start nobody will make."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from attrs import evolve
from returns.result import Result

from nodeau.apps.serving.commands import Started
from nodeau.domain.records import Starter
from nodeau.domain.refusals import Refusal
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import Admission, Snapshot
from tests.support.fakes.machine_plane import ask, plane_with


def test_a_services_admission_names_this_run_as_its_starter(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    admitted: list[Admission] = []
    admit = parts.state.admit

    def watched(
        name: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        done = admit(name, decide)
        admitted.append(done.unwrap())
        return done

    parts.state.admit = watched  # type: ignore[method-assign]
    assert isinstance(plane.serving.run(ask()), Started)
    [admission] = admitted
    assert admission.record.workload.state is WorkloadState.ADMITTED
    assert admission.record.starter is not None and admission.record.starter.pid == os.getpid()
    served = parts.state.snapshot().named("tiny")
    assert served is not None and served.starter is None  # serving: nobody is starting it


def test_an_admitted_workload_whose_run_is_gone_is_said_interrupted(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    gone = subprocess.Popen(["true"])
    gone.wait()
    parts.state.update(
        "tiny",
        lambda r: evolve(
            r,
            workload=evolve(r.workload, state=WorkloadState.ADMITTED),
            server=None,
            starter=Starter(pid=gone.pid, created_at=None),
        ),
    )
    [shown] = plane.serving.workloads()
    assert shown.state == "admitted"
    assert "its start was interrupted (the nodeau run starting it ended)" in shown.sentence
    assert "no model server was recorded for it" in shown.sentence
    assert "nodeau stop tiny --workload ends it and frees the card" in shown.sentence
    assert "it starts once" not in shown.sentence
