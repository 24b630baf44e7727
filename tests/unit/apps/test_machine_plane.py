"""Use cases of the one-machine plane (run, stop, ps, explain, drain, policy) against
contract-checked fakes: the state (FakeStateStore), the model server (FakeModelRuntime)
and the endpoints; the model files, the GGUF reader and the simulated cards are the
real adapters on a temporary folder. Fast: no process is started."""

from __future__ import annotations

from pathlib import Path

import pytest
from attrs import evolve

from nodeau.apps.models.actions import import_model
from nodeau.apps.serving.commands import Refused, Started
from nodeau.domain.placement import Policy
from nodeau.domain.refusals import ReasonCode, RefusalKind
from nodeau.ports.errors import SettingsError
from nodeau.ports.state import StateError, UnknownWorkload
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.machine_plane import FailedService, ask, plane_with

CARD_0 = "SIM-GPU-092fee4d-8a0c-5c09-bf89-10b04b9d1b58"  # simulated cards of machine m1
CARD_1 = "SIM-GPU-38269710-2214-56ae-80ce-f036a762d38b"


def test_an_imported_model_not_qualified_is_refused_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    plane, parts = plane_with(tmp_path)
    outcome = plane.serving.run(ask(unproved=False))
    assert isinstance(outcome, Refused)
    assert outcome.refusal.code is ReasonCode.TASK_NOT_PROVED
    assert outcome.refusal.kind is RefusalKind.QUALIFICATION
    assert "tiny has not proved it can chat (it was never qualified)" in outcome.refusal.sentence
    assert "nodeau model qualify tiny" in outcome.refusal.sentence
    assert parts.state.snapshot().workloads == ()


def test_run_admits_starts_and_serves_behind_its_endpoint(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    outcome = plane.serving.run(ask())
    assert isinstance(outcome, Started)
    w = outcome.workload
    assert (w.name, w.kind, w.model, w.machine, w.state) == (
        "tiny",
        "service",
        "tiny",
        "m1",
        "serving",
    )
    assert w.gpu == CARD_0
    assert w.simulated is True
    assert w.endpoint == "http://127.0.0.1:18001/v1"
    assert w.sentence == "serving on m1 (SIM-GPU-…) since 09:30:05 (0s); nothing to do"
    assert outcome.source == "estimated"
    assert parts.endpoints.running == {"tiny": 18001}
    assert [s.name for s in parts.runtime.started] == ["tiny"]
    assert [v.name for v in plane.serving.workloads()] == ["tiny"]
    assert plane.serving.admission("tiny").placement.gpu_uuid == CARD_0


def test_running_a_serving_name_again_only_brings_its_endpoint_back(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    assert plane.serving.stop("tiny", workload=False).startswith(
        "tiny: endpoint stopped; the model"
    )
    assert parts.endpoints.running == {}
    again = plane.serving.run(ask())
    assert isinstance(again, Started) and again.already
    assert parts.endpoints.running == {"tiny": 18001}  # the same address
    assert len(parts.runtime.started) == 1  # no second model server


def test_a_name_serving_another_model_is_taken(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    other = write_tiny_llama(tmp_path / "other.gguf", seed=8)
    m = parts.models
    import_model(
        other, alias="other", register=True, inspector=m.inspector, store=m.store,
        registry=m.registry,
    )  # fmt: skip
    plane.serving.run(ask(name="chat"))
    with pytest.raises(StateError, match=r"^chat already serves tiny \("):
        plane.serving.run(evolve(ask(name="chat"), model="other"))


def test_a_card_too_small_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path, cards="1 x 1 GiB")
    outcome = plane.serving.run(ask(context=131072))
    assert isinstance(outcome, Refused)
    assert outcome.refusal.code is ReasonCode.NO_CARD_LARGE_ENOUGH
    assert plane.serving.workloads() == ()
    assert parts.runtime.started == [] and parts.endpoints.running == {}


def test_stop_with_workload_frees_the_card(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    said = plane.serving.stop("tiny", workload=True)
    assert said == f"tiny: endpoint and model stopped; {CARD_0} is free"
    assert plane.serving.workloads() == ()
    assert parts.state.snapshot().ledger.reservations == ()
    [record] = parts.state.snapshot().workloads
    assert (record.workload.state.value, record.server) == ("stopped", None)


def test_an_endpoint_that_cannot_start_stops_the_model_and_frees_the_card(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path, fail_endpoint=True)
    with pytest.raises(FailedService):
        plane.serving.run(ask())
    assert plane.serving.workloads() == ()
    assert parts.state.snapshot().ledger.reservations == ()
    [spec] = parts.runtime.started
    assert spec.name == "tiny"


def test_stopping_an_unknown_name_says_so(tmp_path: Path) -> None:
    plane, _ = plane_with(tmp_path)
    with pytest.raises(UnknownWorkload, match=r"^no workload called 'nope'; nodeau ps lists them$"):
        plane.serving.stop("nope", workload=True)


def test_a_drained_machine_takes_nothing_new_and_undrain_lets_it(tmp_path: Path) -> None:
    plane, _ = plane_with(tmp_path, cards="2 x 24 GiB")
    plane.serving.run(ask(name="first"))
    assert plane.machines.drain("m1") == (
        "m1 is drained: nothing new is placed there; its 1 running workload(s) are not "
        "stopped, moved or restarted"
    )
    assert [v.state for v in plane.serving.workloads()] == ["serving"]  # nothing running is touched
    assert plane.machines.listing().machines[0].drained is True
    refused = plane.serving.run(ask(name="second"))
    assert isinstance(refused, Refused)
    assert refused.refusal.code is ReasonCode.NO_ELIGIBLE_MACHINE
    assert (
        plane.machines.undrain("m1") == "m1 takes new placements again; nothing is moved back to it"
    )
    assert plane.machines.listing().machines[0].drained is False
    assert isinstance(plane.serving.run(ask(name="second")), Started)


def test_policy_is_kept_for_new_placements_and_said(tmp_path: Path) -> None:
    plane, _ = plane_with(tmp_path)
    assert plane.machines.set_policy(Policy.SPREAD, None) == (
        "fleet policy is now spread; it applies to new placements only, "
        "0 running workload(s) stay where they are"
    )
    listing = plane.machines.listing()
    assert listing.fleet_policy == "spread"
    assert listing.machines[0].policy == "spread"
    assert plane.machines.set_policy(Policy.PACK, "m1").startswith(
        "m1 now uses pack (its own override)"
    )
    assert plane.machines.listing().machines[0].policy_from == "its own override"


def test_marks_name_only_this_machine(tmp_path: Path) -> None:
    plane, _ = plane_with(tmp_path)
    with pytest.raises(StateError, match=r"^no machine called 'garage' on this plane; this "):
        plane.machines.drain("garage")


@pytest.mark.parametrize("name", ["Chat", "-chat", "chat_1", "a" * 254, ""])
def test_a_name_kubernetes_would_refuse_is_refused_here_too(tmp_path: Path, name: str) -> None:
    plane, parts = plane_with(tmp_path)
    with pytest.raises(SettingsError, match=r"^--name "):
        plane.serving.run(ask(name=name))
    assert parts.runtime.started == []


def test_the_fleet_of_one_lists_its_card_and_who_holds_it(tmp_path: Path) -> None:
    plane, _ = plane_with(tmp_path, cards="2 x 24 GiB")
    plane.serving.run(ask())
    listing = plane.machines.listing()
    assert listing.plane == "one machine (state in SQLite, no Kubernetes)"
    [machine] = listing.machines
    assert (machine.machine, machine.health, machine.simulated) == ("m1", "reporting", True)
    assert [(g.uuid, g.held_by) for g in machine.gpus] == [
        (CARD_0, "tiny"),
        (CARD_1, None),
    ]


def test_allowed_origins_reach_the_endpoint_as_browsers_send_them(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(evolve(ask(), allowed_origins=("HTTPS://Tools.Example:443",)))
    assert parts.endpoints.origins == {"tiny": ("https://tools.example",)}


@pytest.mark.parametrize("origin", ["*", "null", "tools.example", "http://x.example/path"])
def test_an_origin_that_cannot_be_allowed_is_refused_before_anything_starts(
    tmp_path: Path, origin: str
) -> None:
    plane, parts = plane_with(tmp_path)
    with pytest.raises(SettingsError, match=r"^--allow-origin "):
        plane.serving.run(evolve(ask(), allowed_origins=(origin,)))
    assert parts.runtime.started == [] and plane.serving.workloads() == ()


def test_ps_says_a_stopped_endpoint_with_no_address_and_how_to_bring_it_back(
    tmp_path: Path,
) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    [up] = plane.serving.workloads()
    assert (up.state, up.endpoint) == ("serving", "http://127.0.0.1:18001/v1")
    assert up.sentence.endswith("; nothing to do")
    plane.serving.stop("tiny", workload=False)
    assert parts.endpoints.running == {}  # nothing listens on its port
    [stopped] = plane.serving.workloads()
    assert (stopped.state, stopped.endpoint) == ("serving", None)
    assert stopped.sentence == (
        "serving on m1 (SIM-GPU-…) since 09:30:05 (0s); "
        "loaded, endpoint stopped; nodeau run tiny brings it back"
    )
    plane.serving.run(ask())
    [back] = plane.serving.workloads()
    assert back == up
