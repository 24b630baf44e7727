"""What a plan covers (domain/plans.py ``plan_scope``) at its edges: every machine past the
machine bound is named, every machine past the GPU bound too, and the cards left out add up
across machines, a machine without cards in between."""

from __future__ import annotations

from attrs import evolve

from nodeau.domain.plans import HOME, plan_scope


def test_every_machine_past_the_machine_bound_is_named() -> None:
    scope = plan_scope(evolve(HOME, max_machines=1, max_gpus=None), [
        ("a", ("a0",)), ("b", ("b0",)), ("c", ("c0",)),
    ])  # fmt: skip
    assert scope.left_out == (
        ("b", "beyond the Home plan's 1 machines"),
        ("c", "beyond the Home plan's 1 machines"),
    )


def test_every_machine_past_the_gpu_bound_is_named_and_the_cards_left_out_add_up() -> None:
    scope = plan_scope(evolve(HOME, max_machines=None, max_gpus=2), [
        ("a", ("a0", "a1", "a2")), ("b", ()), ("c", ("c0",)), ("d", ("d0", "d1")),
    ])  # fmt: skip
    assert scope.covered_gpus == {"a0", "a1"}
    assert scope.left_out == (
        ("c", "beyond the Home plan's 2 GPUs"),
        ("d", "beyond the Home plan's 2 GPUs"),
    )
    assert scope.gpus_left_out == 1  # a2; b has none, c and d are left out whole
