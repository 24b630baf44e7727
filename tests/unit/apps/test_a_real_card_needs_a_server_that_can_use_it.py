"""On one machine, a real card is given only to a model server that can use it.

Simulated cards claim to be real; the contract-checked fake server says CPU-only, CUDA seeing a
card, or none. A refusal records nothing; ``--cpu`` holds the card, runs on the CPU, says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from attrs import evolve

from nodeau.apps.cli.explain import admission_lines
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.serving.commands import Refused, Started
from nodeau.domain.model_server import ServerAbilities
from nodeau.domain.refusals import ReasonCode
from nodeau.ports.errors import SettingsError
from tests.support.fakes.fake_runtime import CPU_ONLY, SEES_A_CARD
from tests.support.fakes.machine_plane import Parts, ask, plane_with
from tests.support.fakes.real_cards import RealCards


def on_real_cards(tmp_path: Path, server: ServerAbilities) -> tuple[MachinePlane, Parts]:
    plane, parts = plane_with(tmp_path)
    parts.inventory = RealCards("m1", "1 x 24 GiB")
    parts.runtime.abilities = server
    return plane, parts


def test_a_cpu_only_server_is_refused_the_card_and_nothing_is_recorded(tmp_path: Path) -> None:
    plane, parts = on_real_cards(tmp_path, CPU_ONLY)
    outcome = plane.serving.run(ask())
    assert isinstance(outcome, Refused)
    assert outcome.refusal.code is ReasonCode.SERVER_CANNOT_USE_CARD
    assert "`nodeau server install --cuda`" in outcome.refusal.sentence
    assert parts.state.snapshot().workloads == ()
    assert parts.state.snapshot().ledger.reservations == ()
    launched = parts.runtime.started
    assert launched == []  # no model server was started
    assert plane.serving.workloads() == ()


def test_a_cuda_server_that_sees_the_card_is_given_it(tmp_path: Path) -> None:
    plane, parts = on_real_cards(tmp_path, SEES_A_CARD)
    outcome = plane.serving.run(ask())
    assert isinstance(outcome, Started)
    [spec] = parts.runtime.started
    assert spec.gpu_uuid == outcome.workload.gpu and spec.gpu_uuid is not None
    assert outcome.workload.on_cpu is False


def test_cpu_asked_holds_the_card_and_runs_the_model_on_the_cpu(tmp_path: Path) -> None:
    plane, parts = on_real_cards(tmp_path, CPU_ONLY)
    outcome = plane.serving.run(evolve(ask(), on_cpu=True))
    assert isinstance(outcome, Started)
    [spec] = parts.runtime.started
    assert spec.gpu_uuid is None  # the server is not shown the card
    [reservation] = parts.state.snapshot().ledger.reservations
    assert reservation.gpu_uuid == outcome.workload.gpu  # but it is held for the workload
    [view] = plane.serving.workloads()
    assert view.on_cpu
    assert view.sentence.startswith("serving on m1 (SIM-GPU-…, the model on the CPU) since")
    lines = admission_lines(plane.serving.admission("tiny"), simulated=False)
    assert (
        "hardware: the model runs on the CPU, as --cpu asked; the card below is held for it"
        in lines
    )


def test_explaining_a_run_names_the_model_server_check(tmp_path: Path) -> None:
    plane, _ = on_real_cards(tmp_path, CPU_ONLY)
    refused = plane.serving.explain(ask())
    assert not refused.admitted
    assert [(c.check, c.passed) for c in refused.checks][-1] == ("model server", False)
    passed = plane.serving.explain(evolve(ask(), on_cpu=True))
    assert ("model server", True) in [(c.check, c.passed) for c in passed.checks]


class NoServer(Parts):
    @property
    def server(self) -> ServerAbilities:
        raise SettingsError("no model server found: run `nodeau server install`")


def test_with_no_model_server_nothing_is_admitted(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    parts.__class__ = NoServer
    with pytest.raises(SettingsError, match="nodeau server install"):
        plane.serving.run(ask())
    assert parts.state.snapshot().workloads == ()
    assert parts.state.snapshot().ledger.reservations == ()
