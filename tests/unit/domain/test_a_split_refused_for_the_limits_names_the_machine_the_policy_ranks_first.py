"""A split that only the organisation's machine limits stand in the way of is refused as
a limit, naming the machine the view's own policy would have chosen, in one sentence."""

from __future__ import annotations

from nodeau.domain.allowances import Allowances
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import MeasuredTable, predictor
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import OUTSIDE_LIMITS, FleetView, schedule
from nodeau.domain.units import GIB
from tests.support.builders.split_fleets import ARCH, CONFIG, REQUEST, WEIGHTS, ask, sixteens


def outside_limits(settings: SchedulingSettings) -> FleetView:
    """m0 (one of four cards held) and m1 (three free), both outside the limits; no one
    16 GiB card holds the 18 GiB model, two of either machine's free cards do."""
    predict = predictor(
        arch=ARCH, artifact_id=REQUEST.artifact_id, artifact_bytes=18 * GIB, config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    held = Ledger(
        reservations=(Reservation(workload="other", machine="m0", gpu_uuid="GPU-m03", bytes=GIB),)
    )
    return FleetView(
        fleet=Fleet(machines=(sixteens("m0", 4), sixteens("m1", 3))), ledger=held,
        settings=settings, excluded=(("m0", OUTSIDE_LIMITS), ("m1", OUTSIDE_LIMITS)),
        verified_on=frozenset({"m0", "m1"}), predict=predict, plan=ENTERPRISE,
        split=ask(WEIGHTS),
    )  # fmt: skip


def sentence(machine: str) -> str:
    return (
        f"the cards that can take big split are on a machine outside the organisation's "
        f"limits ({machine}); an admin can add it to the limits' allowed machines"
    )


def test_spread_names_the_emptier_machine_outside_the_limits() -> None:
    view = outside_limits(SchedulingSettings(fleet_policy=Policy.SPREAD))
    refused = schedule(REQUEST, view).failure()
    assert refused.code is ReasonCode.MACHINE_NOT_ALLOWED
    assert refused.sentence == sentence("m1")


def test_pack_names_the_fuller_machine_outside_the_limits() -> None:
    view = outside_limits(SchedulingSettings())
    refused = schedule(REQUEST, view).failure()
    assert refused.code is ReasonCode.MACHINE_NOT_ALLOWED
    assert refused.sentence == sentence("m0")
