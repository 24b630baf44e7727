"""On one machine with real cards, a model no one card holds gets every card of its split.

The llama-server is given them in slot order; a server that cannot split (llama-cpp-python's) or
``--cpu`` is not offered a split. Simulated cards claiming to be real, the contract-checked fake.
"""

from __future__ import annotations

from pathlib import Path

from attrs import evolve

from nodeau.apps.models.actions import import_model
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.serving.commands import Refused, RunAsk, Started
from nodeau.domain.refusals import ReasonCode
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_runtime import SEES_A_CARD
from tests.support.fakes.machine_plane import Parts, ask, plane_with
from tests.support.fakes.real_cards import RealCards

LLAMA_SERVER = evolve(SEES_A_CARD, server="llama-server")
CONTEXT = 65536  # its KV cache (2 GiB) and compute take no 4 GiB card alone


def with_big_model(tmp_path: Path, server_name: str) -> tuple[MachinePlane, Parts]:
    plane, parts = plane_with(tmp_path)
    parts.inventory = RealCards("m1", "3 x 4 GiB")
    parts.runtime.abilities = evolve(LLAMA_SERVER, server=server_name)
    big = write_tiny_llama(tmp_path / "big.gguf", n_layers=8, n_embd=1024, n_head=8,
                           n_head_kv=8, n_ff=256, context=CONTEXT, quant="f16")  # fmt: skip
    m = parts.models
    import_model(big, alias="big", register=True, inspector=m.inspector, store=m.store,
                 registry=m.registry)  # fmt: skip
    return plane, parts


def big() -> RunAsk:
    return evolve(ask(context=CONTEXT), model="big")


def test_llama_server_is_given_every_card_of_the_split_in_slot_order(tmp_path: Path) -> None:
    plane, parts = with_big_model(tmp_path, "llama-server")
    outcome = plane.serving.run(big())
    assert isinstance(outcome, Started)
    [record] = parts.state.snapshot().workloads
    w = record.workload
    assert len(w.cards) == 2 and outcome.workload.every_card == w.cards
    [spec] = parts.runtime.started
    assert spec.gpu_uuid == w.gpu_uuid
    assert spec.split == tuple(zip(w.cards, w.tensor_split, strict=True))
    assert spec.visible_cards == ",".join(w.cards)
    held = parts.state.snapshot().ledger.reservations
    assert tuple(r.gpu_uuid for r in held) == w.cards

    plane.serving.stop("big", workload=True)
    assert parts.state.snapshot().ledger.reservations == ()


def test_a_server_that_cannot_split_is_refused_the_model(tmp_path: Path) -> None:
    plane, parts = with_big_model(tmp_path, "llama-cpp-python")
    outcome = plane.serving.run(big())
    assert isinstance(outcome, Refused)
    assert outcome.refusal.code is ReasonCode.NO_CARD_LARGE_ENOUGH
    assert "split" not in outcome.refusal.sentence
    assert parts.runtime.started == [] and parts.state.snapshot().ledger.reservations == ()


def test_cpu_asked_is_not_split(tmp_path: Path) -> None:
    plane, parts = with_big_model(tmp_path, "llama-server")
    outcome = plane.serving.run(evolve(big(), on_cpu=True))
    assert isinstance(outcome, Refused)
    assert outcome.refusal.code is ReasonCode.NO_CARD_LARGE_ENOUGH
    assert parts.state.snapshot().ledger.reservations == ()
