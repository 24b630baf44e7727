"""A workload record whose cards and slot counts disagree is refused with a sentence naming
the workload and what is wrong: a card named twice, a card given no slots, a split whose
counts are not one per card, a split count on a workload of one card."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodeau.domain.workloads import Workload, WorkloadKind, WorkloadState

SINCE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def big(**fields: object) -> Workload:
    values: dict[str, object] = {
        "name": "big", "kind": WorkloadKind.SERVICE, "model": "big", "artifact_id": "ab" * 32,
        "machine": "m1", "gpu_uuid": "GPU-0", "state": WorkloadState.SERVING, "since": SINCE,
        **fields,
    }  # fmt: skip
    return Workload(**values)  # type: ignore[arg-type]


def test_a_split_that_names_its_first_card_again_is_refused() -> None:
    with pytest.raises(ValueError) as raised:
        big(more_cards=("GPU-1", "GPU-0"), tensor_split=(3, 3, 3))
    assert str(raised.value) == "workload big names a card twice"


@pytest.mark.parametrize(
    "counts",
    [(9, 0), (0, 9), (9,), (3, 3, 3), ()],
    ids=["a card with no slots", "the first with none", "one count", "three counts", "none"],
)
def test_a_split_gives_every_card_it_holds_slots(counts: tuple[int, ...]) -> None:
    with pytest.raises(ValueError) as raised:
        big(more_cards=("GPU-1",), tensor_split=counts)
    assert str(raised.value) == "workload big's split gives every one of its cards slots"


def test_a_split_of_one_slot_on_each_card_is_a_workload() -> None:
    assert big(more_cards=("GPU-1",), tensor_split=(1, 1)).split == (("GPU-0", 1), ("GPU-1", 1))


def test_a_workload_of_one_card_has_no_split_counts() -> None:
    with pytest.raises(ValueError) as raised:
        big(tensor_split=(9,))
    assert str(raised.value) == "workload big holds one card and has no split"
