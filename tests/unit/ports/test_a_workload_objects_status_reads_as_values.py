"""A GPUService's or BatchJob's status reads as values (state, machine, card, reservation,
refusal, admission), so no command parses the raw status document itself."""

from __future__ import annotations

import pytest

from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.workload_objects import WorkloadObject


def obj(status: dict[str, object]) -> WorkloadObject:
    return WorkloadObject(
        kind=WorkloadKind.SERVICE,
        name="chat",
        title="GPUService nodeau-system/chat",
        uid="u1",
        version="7",
        generation=1,
        ask=None,
        record=None,
        status=status,
    )


def test_an_object_not_yet_decided_names_nothing() -> None:
    fresh = obj({})
    assert (fresh.state, fresh.machine, fresh.gpu_uuid, fresh.sentence) == ("", None, None, None)
    assert (fresh.reserved_bytes, fresh.source, fresh.packed_admission) == (None, "estimated", None)
    assert fresh.refusal is None and not fresh.decided and not fresh.refused


def test_an_admitted_object_names_its_machine_card_and_reservation() -> None:
    held = obj(
        {
            "state": "serving",
            "machine": "m1",
            "gpuUUID": "GPU-1",
            "reservedBytes": 9_000_000_000,
            "source": "measured",
            "admission": '{"packed": true}',
            "sentence": "serving on m1",
        }
    )
    assert (held.state, held.machine, held.gpu_uuid) == ("serving", "m1", "GPU-1")
    assert (held.reserved_bytes, held.source) == (9_000_000_000, "measured")
    assert held.packed_admission == '{"packed": true}' and held.sentence == "serving on m1"
    assert held.decided and not held.refused


@pytest.mark.parametrize("odd", ["9", True, 1.5, None])
def test_a_reservation_that_is_not_a_whole_number_is_none(odd: object) -> None:
    assert obj({"reservedBytes": odd}).reserved_bytes is None


def test_a_refused_object_gives_its_refusal_as_a_value() -> None:
    code = ReasonCode.NO_CARD_LARGE_ENOUGH
    refused = obj(
        {"state": "refused", "refusal": {"code": code.value, "message": "no card holds it"}}
    )
    assert refused.refusal == Refusal.of(code, "no card holds it")
    assert refused.refused and refused.decided
    assert obj({"refusal": "not a mapping"}).refusal is None
