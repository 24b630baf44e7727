"""What a plan covers (domain/plans.py ``plan_scope``) at its edges: every machine past the
machine bound is named, every machine past the GPU bound too, the cards left out add up
across machines, a machine without cards in between, and machines count by what they do
now (holding work, then taking work), not by name."""

from __future__ import annotations

from attrs import evolve

from nodeau.domain.plans import HOME, coverage_order, plan_scope

HOME_TWO = evolve(HOME, max_machines=2, max_gpus=None)


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


def test_machines_holding_work_count_first_then_those_taking_work_then_the_rest() -> None:
    order = coverage_order(["a", "b", "c", "d"], holding={"c"}, taking_work={"b", "c", "d"})
    assert order == ("c", "b", "d", "a")
    assert coverage_order(["b", "a"]) == ("a", "b")  # nothing known: name order


def test_a_covered_machine_that_stopped_answering_gives_its_slot_to_one_that_reports() -> None:
    four = [(m, (f"{m}0",)) for m in ("m1", "m2", "m3", "m4")]
    # m1 holds nothing now (its workload is moving) and stopped answering; m2 holds work
    scope = plan_scope(HOME_TWO, four, holding={"m2"}, taking_work={"m2", "m3", "m4"})
    assert scope.covered_gpus == {"m20", "m30"}
    assert dict(scope.left_out).keys() == {"m1", "m4"}
    # while m1 still holds work, it keeps its slot: nothing running is ever left out
    held = plan_scope(HOME_TWO, four, holding={"m1", "m2"}, taking_work={"m2", "m3", "m4"})
    assert held.covered_gpus == {"m10", "m20"}
