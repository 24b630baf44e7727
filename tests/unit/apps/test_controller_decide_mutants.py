"""The controller's decision, at the points the mutation run found unchecked: which fleet
it plans on, the measured table and allowances it is given, the names a person reads in
its request and refusals, and the exact sentence for a model no machine holds."""

from __future__ import annotations

from returns.pipeline import is_successful
from returns.result import Result

from nodeau.apps.controller.decide import (
    Planning,
    Proved,
    fleet_of,
    planning,
    resolve,
    unproved_refusal,
)
from nodeau.domain.catalog import Catalog
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import GIB, MIB, Allowances, MeasuredKey, MeasuredTable, Measurement
from nodeau.domain.model_info import runtime_config
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.qualification import EvidenceBook
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.tasks import Task
from nodeau.ports.cluster import MarkedFleet
from tests.support.kube_controller import SMALL_ID, SUMMARY
from tests.unit.apps.test_controller_decide import (
    EMPTY,
    FLEET,
    NOW,
    admitted,
    artifact,
    ask,
    decider,
    marks,
    report,
)


def test_a_model_no_machine_holds_is_refused_with_the_whole_sentence() -> None:
    refusal = resolve("llama", FLEET).failure()
    assert refusal.code is ReasonCode.NO_VERIFIED_COPY
    assert refusal.sentence == (
        "llama: no machine in the fleet holds a verified copy of a model by that name or id "
        "(at least 6 hex digits); pull or import it on a machine, then run it"
    )


def test_the_control_plane_machine_is_marked_in_the_fleet_and_no_other() -> None:
    fleet = fleet_of(
        (report("cp", 1), report("m1", 1)),
        MarkedFleet(
            nodes=("cp", "m1"),
            drained=frozenset(),
            upgrading=frozenset(),
            control_plane=frozenset({"cp"}),
            settings=SchedulingSettings(),
        ),
    )
    assert {m.name: m.control_plane for m in fleet.machines} == {"cp": True, "m1": False}


def planned_for(model: str, fleet: Fleet | None = None) -> Result[Planning, Refusal]:
    """The controller's planning of ``model`` over FLEET's three machines."""
    return planning(
        ask(model=model),
        reports=FLEET,
        marks=marks("m1", "m2", "m3"),
        health={},
        plan=ENTERPRISE,
        fleet=fleet,
    )


def test_planning_uses_the_fleet_it_is_given_rather_than_making_one() -> None:
    given = Fleet(
        machines=(
            Machine(
                name="m1", gpus=(Gpu(uuid="GPU-given", model="NVIDIA L4", total_bytes=24 * GIB),)
            ),
        )
    )
    planned = planned_for("qwen", given).unwrap()
    assert planned.fleet is given


def test_the_request_and_the_limits_read_the_name_the_person_typed_and_the_artifact() -> None:
    planned = planned_for("qwen-alias").unwrap()
    assert planned.request.model == "qwen-alias"  # the second name: not the first one
    assert planned.shape.model == "qwen-alias"
    assert planned.shape.artifact_id == SMALL_ID


def test_a_resolution_shows_the_name_typed_when_it_is_one_of_its_names() -> None:
    found = resolve("qwen-alias", FLEET).unwrap()
    assert found.display_name("qwen-alias") == "qwen-alias"
    assert found.display_name(SMALL_ID[:8]) == "qwen"
    nameless = resolve(SMALL_ID[:8], (report("m9", 1, artifact(SMALL_ID)),)).unwrap()
    assert nameless.display_name(SMALL_ID[:8]) == SMALL_ID[:12]


def test_an_unproved_task_is_refused_under_the_name_the_person_typed() -> None:
    found = resolve("qwen-alias", FLEET).unwrap()
    refusal = unproved_refusal(
        ask(model="qwen-alias"), found, Proved(catalog=Catalog(), evidence=EvidenceBook.empty())
    )
    assert refusal is not None
    assert refusal.code is ReasonCode.TASK_NOT_PROVED
    assert refusal.sentence.startswith("qwen-alias has not proved it can chat (")


def test_the_decision_plans_with_the_measured_table_it_is_given() -> None:
    config = runtime_config(SUMMARY, Task.CHAT, None)
    table = MeasuredTable(
        measurements=(
            Measurement(
                key=MeasuredKey(
                    artifact_id=SMALL_ID, gpu_model="NVIDIA L4", config_key=config.key()
                ),
                peak_bytes=5 * GIB,
            ),
        )
    )
    fleet = (report("m1", 1, artifact(SMALL_ID, "qwen")),)
    decision = admitted(decider(ask(), reports=fleet, marks=marks("m1"), health={}, now=NOW,
                                table=table)(EMPTY))  # fmt: skip
    prediction = decision.admitted.prediction_for("NVIDIA L4")
    assert prediction.source.value == "measured"
    assert decision.placement.reservation.bytes == prediction.total_bytes


def test_the_decision_plans_with_the_allowances_it_is_given() -> None:
    fleet = (report("m1", 1, artifact(SMALL_ID, "qwen")),)
    allowances = Allowances(runtime_footprint_bytes=3 * MIB, margin_percent=0, margin_floor_bytes=0)
    decide = decider(
        ask(), reports=fleet, marks=marks("m1"), health={}, now=NOW, allowances=allowances
    )
    terms = dict(
        (t.name, t.bytes)
        for t in admitted(decide(EMPTY)).admitted.prediction_for("NVIDIA L4").terms
    )
    assert terms["runtime footprint"] == 3 * MIB
    assert terms["margin"] == 0


def test_planning_refuses_what_no_machine_holds_before_anything_else() -> None:
    outcome = planned_for("nothing-here")
    assert not is_successful(outcome)
    assert outcome.failure().code is ReasonCode.NO_VERIFIED_COPY
