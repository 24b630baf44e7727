"""Recovery: never early, never for batch jobs, upgrading or control-plane machines, no loops."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.card_split import LayerWeights
from nodeau.domain.health import MachineHealth, Signals, assess
from nodeau.domain.memory import GIB, Prediction, Source, Term
from nodeau.domain.recovery import (
    CopyNeed,
    RecoveryAction,
    RecoveryDecision,
    copy_asks,
    copy_need,
    decide_recovery,
    fleet_alarm,
    held_as,
    left_behind,
    machines_that_fit,
)
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView
from nodeau.domain.workloads import (
    HeldReason,
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
)
from tests.support.builders.fleets import flat, fleet, gpu, machine, request
from tests.support.builders.recovery_inputs import (
    ART,
    DEGRADED,
    GONE,
    LEDGER,
    REPORTING,
    T0,
    asked,
    need,
    service,
    unreachable_since,
    view,
)
from tests.support.builders.split_fleets import ask

UPGRADING = assess(Signals(node_heartbeat_at=GONE, agent_report_at=GONE, upgrading=True), T0)


def decide(
    w: Workload,
    health: MachineHealth,
    now: datetime = T0,
    v: FleetView | None = None,
    control_plane: str | None = "cp",
) -> RecoveryDecision:
    return decide_recovery(w, request("svc"), health, now, v or view(), control_plane)


def test_recovers_once_unreachable_for_the_delay_onto_another_machine() -> None:
    d = decide(service(), unreachable_since(T0 - timedelta(minutes=3)))
    assert (d.workload, d.action) == ("svc", RecoveryAction.RECOVER)
    assert d.placement is not None
    assert (d.placement.machine, d.placement.gpu_uuid) == ("attic", "A1")
    assert d.sentence == (
        "garage has been unreachable for 0:03:00; svc starts on attic (A1); "
        "its endpoint stays the same"
    )


def test_waits_one_second_before_the_delay() -> None:
    since = T0 - timedelta(minutes=3) + timedelta(seconds=1)
    d = decide(service(), unreachable_since(since))
    assert d.action is RecoveryAction.HOLD
    assert d.held_reason is HeldReason.WAITING_FOR_DELAY
    assert d.fires_at == since + timedelta(minutes=3)
    assert d.sentence == (
        "garage stopped answering; svc recovers automatically at 12:00:01 if it is still "
        "unreachable then"
    )


def test_a_longer_delay_is_respected() -> None:
    w = service(recovery_after=timedelta(minutes=10))
    assert decide(w, unreachable_since(T0 - timedelta(minutes=9))).action is RecoveryAction.HOLD
    assert decide(w, unreachable_since(T0 - timedelta(minutes=10))).action is RecoveryAction.RECOVER


@pytest.mark.parametrize(
    ("w", "reason", "sentence"),
    [
        (
            service(recovery_mode=RecoveryMode.NEVER),
            HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
            "garage stopped answering; recovery is off, so svc waits for garage",
        ),
        (
            service(
                kind=WorkloadKind.BATCH,
                state=WorkloadState.RUNNING,
                recovery_mode=RecoveryMode.NEVER,
            ),
            HeldReason.BATCH_JOB,
            "garage stopped answering; batch jobs do not recover, svc waits for it",
        ),
        (
            service(machine="cp", gpu_uuid="C1"),
            HeldReason.ON_CONTROL_PLANE_MACHINE,
            "cp is the control-plane machine, which makes the decision; svc waits for it",
        ),
    ],
)
def test_cases_that_wait_for_their_machine(w: Workload, reason: HeldReason, sentence: str) -> None:
    d = decide(w, unreachable_since(T0 - timedelta(hours=5)))
    assert (d.action, d.held_reason, d.sentence) == (RecoveryAction.HOLD, reason, sentence)
    assert d.workload == w.name
    assert d.placement is None


@pytest.mark.parametrize(
    ("health", "sentence"),
    [
        (REPORTING, "garage is reporting; nothing moves"),
        (DEGRADED, "garage is degraded; nothing moves"),
        (UPGRADING, "garage is upgrading; nothing moves"),
    ],
)
def test_a_machine_that_is_not_unreachable_moves_nothing(
    health: MachineHealth, sentence: str
) -> None:
    d = decide(service(), health)
    assert (d.action, d.sentence, d.placement) == (RecoveryAction.NOTHING, sentence, None)


def test_a_held_workload_whose_machine_answers_again_resumes_where_it_was() -> None:
    w = service(state=WorkloadState.HELD, held_reason=HeldReason.WAITING_FOR_DELAY)
    d = decide(w, REPORTING)
    assert (d.action, d.sentence) == (
        RecoveryAction.RESUME,
        "garage answers again; svc was never moved",
    )


def test_a_held_workload_on_an_upgrading_machine_stays_as_it_is() -> None:
    w = service(state=WorkloadState.HELD, held_reason=HeldReason.WAITING_FOR_DELAY)
    d = decide(w, UPGRADING)
    assert (d.action, d.sentence) == (RecoveryAction.NOTHING, "garage is upgrading; nothing moves")


def test_a_finished_workload_has_nothing_to_recover() -> None:
    d = decide(service(state=WorkloadState.STOPPED), unreachable_since(GONE))
    assert (d.workload, d.action, d.sentence) == (
        "svc",
        RecoveryAction.NOTHING,
        "svc holds no card",
    )


def test_held_for_model_files_names_the_machine_asked_to_fetch_a_copy() -> None:
    d = decide(service(), unreachable_since(GONE), v=view(verified_on=frozenset({"garage"})))
    assert d.action is RecoveryAction.HOLD
    assert d.held_reason is HeldReason.MODEL_FILES
    assert d.fetch_copy_to == "attic"
    assert d.refusal is not None
    assert d.refusal.code is ReasonCode.NO_VERIFIED_COPY
    assert d.sentence == (
        "no other machine that could run svc has a verified copy; attic is asked to fetch "
        "one (a model you imported: import it there), and it moves once attic has checked "
        "every file"
    )


def test_held_for_capacity_waits_for_a_card_without_retrying() -> None:
    busy = Ledger(
        reservations=(
            *LEDGER.reservations,
            Reservation(workload="other", machine="attic", gpu_uuid="A1", bytes=GIB),
            Reservation(workload="third", machine="cp", gpu_uuid="C1", bytes=GIB),
        )
    )
    d = decide(service(), unreachable_since(GONE), v=view(ledger=busy))
    assert (d.action, d.held_reason, d.fetch_copy_to) == (
        RecoveryAction.HOLD,
        HeldReason.CAPACITY,
        None,
    )
    assert d.refusal is not None
    assert d.refusal.code is ReasonCode.NO_FREE_CARD
    assert d.sentence == (
        "no other machine has a free card that takes svc; it starts when one frees "
        "(no retries until then)"
    )
    # asked again with nothing changed, the answer is the same: no attempt counter, no loop
    assert (
        decide(service(), unreachable_since(GONE), now=T0 + timedelta(hours=1), v=view(ledger=busy))
        == d
    )


def test_missing_files_with_no_machine_large_enough_is_capacity() -> None:
    d = decide(
        service(),
        unreachable_since(GONE),
        v=view(verified_on=frozenset({"garage"}), predict=flat(30 * GIB)),
    )
    assert d.held_reason is HeldReason.CAPACITY


def test_drained_machines_are_never_targets() -> None:
    v = view(excluded=(("attic", "drained"), ("garage", "unreachable")))
    d = decide(service(), unreachable_since(GONE), v=v)
    assert d.placement is not None
    assert d.placement.machine == "cp"


def test_a_view_that_still_offers_the_dead_machine_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="still a candidate"):
        decide(service(), unreachable_since(GONE), v=view(excluded=()))


def test_a_server_on_another_machine_than_its_record_was_left_behind() -> None:
    assert left_behind("garage", "attic") is True
    assert left_behind("attic", "attic") is False


def test_after_recovery_the_returning_machine_moves_nothing_back() -> None:
    d = decide(service(), unreachable_since(GONE))
    assert d.placement is not None
    moved = service(machine=d.placement.machine, gpu_uuid=d.placement.gpu_uuid)
    # garage is back; the workload now lives on attic, which reports fine
    again = decide(moved, REPORTING, v=view(excluded=()))
    assert again.action is RecoveryAction.NOTHING
    assert left_behind("garage", moved.machine)  # its old server is ended, not reused


workload_cases = st.builds(
    lambda kind, mode, on_cp, state: service(
        kind=kind,
        recovery_mode=RecoveryMode.NEVER if kind is WorkloadKind.BATCH else mode,
        machine="cp" if on_cp else "garage",
        gpu_uuid="C1" if on_cp else "G1",
        state=(
            WorkloadState.RUNNING
            if kind is WorkloadKind.BATCH and state is WorkloadState.SERVING
            else state
        ),
    ),
    st.sampled_from(list(WorkloadKind)),
    st.sampled_from(list(RecoveryMode)),
    st.booleans(),
    st.sampled_from([WorkloadState.ADMITTED, WorkloadState.STARTING, WorkloadState.SERVING]),
)


@given(workload_cases, st.integers(0, 3600), st.integers(1, 900))
def test_recovery_fires_only_when_due_and_allowed(w: Workload, quiet_for: int, delay: int) -> None:
    w = evolve(w, recovery_after=timedelta(seconds=delay))
    health = unreachable_since(T0 - timedelta(seconds=quiet_for))
    v = view(excluded=((w.machine, "unreachable"),))
    d = decide_recovery(w, request("svc"), health, T0, v, "cp")
    fired = d.action is RecoveryAction.RECOVER
    allowed = (
        w.kind is WorkloadKind.SERVICE
        and w.recovery_mode is RecoveryMode.AUTOMATIC
        and w.machine != "cp"
        and quiet_for >= delay
    )
    assert fired == allowed
    if fired:
        assert d.placement is not None
        assert d.placement.machine != w.machine
    else:
        assert d.placement is None
        assert d.action is RecoveryAction.HOLD


@given(st.integers(1, 60), st.integers(0, 3600))
def test_recovery_first_fires_exactly_the_delay_after_the_machine_went_quiet(
    delay: int, went_quiet: int
) -> None:
    """A brute-force walk, second by second, from the moment the machine went quiet: every
    decision before the delay has passed holds the workload, the first to move it comes
    exactly ``delay`` seconds later."""
    w = service(recovery_after=timedelta(seconds=delay))
    since = T0 + timedelta(seconds=went_quiet)
    actions = [
        decide(w, unreachable_since(since), since + timedelta(seconds=second)).action
        for second in range(delay + 2)
    ]
    assert actions.index(RecoveryAction.RECOVER) == delay
    assert set(actions[:delay]) == {RecoveryAction.HOLD}


@given(workload_cases, st.sampled_from([REPORTING, DEGRADED, UPGRADING]))
def test_nothing_moves_unless_the_machine_is_unreachable(
    w: Workload, health: MachineHealth
) -> None:
    d = decide_recovery(w, request("svc"), health, T0 + timedelta(days=1), view(excluded=()), "cp")
    assert d.action is RecoveryAction.NOTHING
    assert d.placement is None


def test_a_copy_is_asked_where_it_would_go_only_when_no_machine_that_fits_holds_one() -> None:
    chosen: list[str] = []

    def target(n: CopyNeed) -> str:
        chosen.append(n.workload)
        return "attic"

    assert copy_asks([need()], (), target).add == (("attic", ART, "qwen", "recovery:svc"),)
    assert chosen == ["svc"]
    # a machine that fits holds a verified copy already: nothing asked, no target sought
    assert copy_asks([need(verified_on=frozenset({"shed"}))], (), target).add == ()
    assert chosen == ["svc"]
    assert copy_asks([need()], (), lambda _n: None).add == ()  # nowhere to keep one


def test_an_ask_it_relies_on_stays_and_one_it_no_longer_needs_is_taken_back() -> None:
    mine = asked(("attic", ART, "recovery:svc"))
    kept = copy_asks([need()], mine, lambda _n: "shed")
    assert (kept.add, kept.withdraw) == ((), ())  # relied on: no write
    moved_away = copy_asks([need(fits_on=frozenset({"shed"}))], mine, lambda _n: "shed")
    assert moved_away.withdraw == (("attic", ART, "recovery:svc"),)
    assert moved_away.add == (("shed", ART, "qwen", "recovery:svc"),)
    gone = copy_asks([], mine, lambda _n: "shed")
    assert (gone.add, gone.withdraw) == ((), (("attic", ART, "recovery:svc"),))


def test_a_persons_ask_is_never_touched() -> None:
    theirs = asked(("attic", ART, "person"), ("shed", "cd" * 32, "person"))
    left = copy_asks([], theirs, lambda _n: "attic")
    assert (left.add, left.withdraw) == ((), ())


ALL = frozenset({"garage", "attic", "cp"})


def test_only_an_automatic_service_holding_a_card_needs_a_copy() -> None:
    assert copy_need(service(recovery_mode=RecoveryMode.NEVER), ALL, view()) is None
    assert copy_need(service(state=WorkloadState.STOPPED), ALL, view()) is None
    job = service(
        kind=WorkloadKind.BATCH, state=WorkloadState.RUNNING, recovery_mode=RecoveryMode.NEVER
    )
    assert copy_need(job, ALL, view()) is None
    assert copy_need(service(), ALL, view()) == CopyNeed(
        workload="svc",
        artifact="a" * 64,
        name="qwen",
        fits_on=frozenset({"attic", "cp"}),
        verified_on=frozenset({"garage", "attic", "cp"}),
    )


def by_model(total: dict[str, int]) -> Callable[[str], Prediction]:
    def predict(model: str) -> Prediction:
        term = Term(name="peak", bytes=total[model], source=Source.ESTIMATED, basis="test")
        return Prediction(terms=(term,), source=Source.ESTIMATED)

    return predict


def test_a_card_exactly_as_large_as_its_models_prediction_fits() -> None:
    cards = fleet(
        machine("a", gpu("A1", 24, model="NVIDIA L4")),
        machine("b", gpu("B1", 16, model="NVIDIA T4")),
        machine("c", gpu("C1", 16, model="NVIDIA A2")),
    )
    predict = by_model({"NVIDIA L4": 24 * GIB, "NVIDIA T4": 16 * GIB, "NVIDIA A2": 17 * GIB})
    assert machines_that_fit(view(fleet=cards, predict=predict)) == frozenset({"a", "b"})


def test_a_model_split_across_cards_fits_where_the_cards_of_one_machine_hold_it() -> None:
    cards = fleet(
        machine("one", gpu("O1", 24)),  # no split on one card
        machine("two", gpu("T1", 24), gpu("T2", 24)),
        machine("small", gpu("S1", 16), gpu("S2", 16)),
        machine("big", gpu("B1", 80)),  # fits whole
    )
    weights = LayerWeights(input_bytes=GIB // 2, layer_bytes=(19 * GIB,) * 8, output_bytes=GIB)
    predict = flat(160 * GIB)  # whole, it fits no card: only a split does
    whole = view(fleet=cards, predict=flat(70 * GIB))
    assert machines_that_fit(whole) == frozenset({"big"})
    split = evolve(whole, predict=predict, split=ask(weights))
    assert machines_that_fit(split) == frozenset()  # 152 GiB of layers: no two cards hold it
    weights = LayerWeights(input_bytes=GIB // 2, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)
    split = evolve(whole, predict=predict, split=ask(weights))
    assert machines_that_fit(split) == frozenset({"two", "small"})


def test_a_hold_is_written_since_the_moment_given() -> None:
    hold = RecoveryDecision(
        workload="svc",
        action=RecoveryAction.HOLD,
        held_reason=HeldReason.CAPACITY,
        sentence="no other machine has a free card",
    )
    since = T0 - timedelta(minutes=7)
    held = held_as(service(), hold, since)
    assert held is not None
    assert (held.state, held.since, held.held_reason) == (
        WorkloadState.HELD,
        since,
        HeldReason.CAPACITY,
    )


def test_a_hold_without_a_reason_writes_nothing() -> None:
    reasonless = RecoveryDecision(
        workload="svc", action=RecoveryAction.HOLD, sentence="held, for no reason given"
    )
    assert held_as(service(), reasonless, T0) is None


def test_the_fleet_alarm_sounds_only_past_half_the_fleet_and_never_for_one_machine() -> None:
    quiet = unreachable_since(GONE)
    assert fleet_alarm({"m1": quiet}) is None
    assert fleet_alarm({"m1": quiet, "m2": quiet, "m3": REPORTING, "m4": REPORTING}) is None
    assert fleet_alarm({"m1": quiet, "m2": quiet, "m3": quiet, "m4": REPORTING}) == (
        "3 of 4 machines are unreachable at once (more than half): Nodeau suspects the "
        "network or its control plane, not the machines, and moves nothing until at least "
        "half of the fleet answers"
    )
