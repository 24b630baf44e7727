"""A recovery's move written out field by field (domain/recovery.py): the workload a move
makes, the record that keeps its endpoint, a recovery choice changed on a held workload,
the sentence of a move the organisation's limits stop, and where a copy is kept whatever
the cards hold today."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from attrs import evolve

from nodeau.domain.free_cards import FreeCards
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.recovery import (
    RecoveryAction,
    RecoveryDecision,
    answering,
    copy_target,
    leaving,
    moved_admission,
    nowhere_to_go,
    recovered,
    with_recovery,
)
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import schedule
from nodeau.domain.workloads import (
    HeldReason,
    RecoveryMode,
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
)
from tests.support.builders.fleets import fleet, gpu, machine, request
from tests.support.builders.recovery_inputs import (
    DEGRADED,
    FIVE_MINUTES,
    FLEET,
    GONE,
    LEDGER,
    MOVED,
    REPORTING,
    T0,
    service,
    unreachable_since,
    view,
)

S = WorkloadState


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def before() -> Workload:
    """A service on garage that restarted twice, set to recover after five minutes."""
    return service(recovery_after=FIVE_MINUTES, restarts=2)


def after(**changes: object) -> Workload:
    """What admission placed on attic: another model name, its own since and choices, and a
    restart in progress, none of which a move keeps."""
    fields: dict[str, object] = {
        "model": "qwen-alias",
        "machine": "attic",
        "gpu_uuid": "A1",
        "state": S.RESTARTING,
        "since": T0 - timedelta(minutes=1),
        "recovery_mode": RecoveryMode.NEVER,
        "recovery_after": timedelta(minutes=3),
        "next_step": "restarts at 11:59:30",
        "restarts": 4,
        "last_exit": ServerExit.killed(9, "SIGKILL", T0 - timedelta(minutes=1)),
        "next_attempt": T0 + timedelta(seconds=30),
        "crash_streak": 3,
    }
    fields.update(changes)
    return service(**fields)


def test_a_move_is_recovering_on_its_new_card_with_its_own_choices_and_no_restart() -> None:
    assert recovered(before(), after(), unreachable_since(GONE), T0) == MOVED


def test_a_move_of_a_workload_admitted_as_held_clears_its_held_reason() -> None:
    held = after(
        state=S.HELD, held_reason=HeldReason.CAPACITY, recovery_mode=RecoveryMode.AUTOMATIC
    )
    held = evolve(
        held, next_attempt=None, last_exit=None, next_step=None, restarts=0, crash_streak=0
    )
    assert recovered(before(), held, unreachable_since(GONE), T0) == MOVED


def test_only_an_unreachable_machine_is_recovered_from() -> None:
    with pytest.raises(ValueError, match=exactly("garage is reporting; nothing recovers from it")):
        recovered(before(), after(), REPORTING, T0)
    # a degraded machine has a since too: its state alone refuses the move
    assert DEGRADED.since is not None
    with pytest.raises(ValueError, match=exactly("garage is degraded; nothing recovers from it")):
        recovered(before(), after(), DEGRADED, T0)


def test_a_move_goes_onto_another_machine() -> None:
    with pytest.raises(ValueError, match=exactly("svc recovers onto another machine than garage")):
        recovered(before(), after(machine="garage", gpu_uuid="G1"), unreachable_since(GONE), T0)


def test_a_moved_admission_keeps_the_endpoint_the_workload_had() -> None:
    scheduled = schedule(request("svc"), view()).unwrap()
    config = RuntimeConfig(context_tokens=4096)
    admitted_record = WorkloadRecord(workload=after(), config=config, model_path="/m/qwen.gguf")
    admission = Admission(
        record=admitted_record,
        admitted=scheduled.admitted,
        placement=scheduled.placement,
        decided_at=T0,
    )
    old = WorkloadRecord(
        workload=before(), config=config, model_path="/m/qwen.gguf", endpoint_port=8101
    )
    moved = moved_admission(admission, old, unreachable_since(GONE), T0)
    assert moved.record == WorkloadRecord(
        workload=MOVED, config=config, model_path="/m/qwen.gguf", endpoint_port=8101
    )
    assert (moved.placement, moved.decided_at) == (scheduled.placement, T0)


def test_a_machine_that_answers_moves_nothing_and_names_the_workload() -> None:
    assert answering(service(), REPORTING) == RecoveryDecision(
        workload="svc", action=RecoveryAction.NOTHING, sentence="garage is reporting; nothing moves"
    )
    held = service(state=S.HELD, held_reason=HeldReason.WAITING_FOR_DELAY)
    assert answering(held, REPORTING) == RecoveryDecision(
        workload="svc",
        action=RecoveryAction.RESUME,
        sentence="garage answers again; svc was never moved",
    )


def test_a_move_the_limits_stop_says_which_limit_and_keeps_the_refusal() -> None:
    refusal = Refusal.of(ReasonCode.MACHINE_NOT_ALLOWED, "attic is not on the allowed list")
    decision = nowhere_to_go(service(), request("svc"), view(), refusal)
    assert decision == RecoveryDecision(
        workload="svc",
        action=RecoveryAction.HOLD,
        held_reason=HeldReason.LIMITS,
        refusal=refusal,
        sentence="the machines that could take svc are outside what the organisation's "
        "limits or the plan cover (limit.machine-not-allowed: attic is not on the allowed "
        "list); it moves once they cover one (no retries until then)",
    )


def test_a_batch_job_never_recovers_but_can_be_set_to_never() -> None:
    job = service(kind=WorkloadKind.BATCH, state=S.RUNNING, recovery_mode=RecoveryMode.NEVER)
    assert with_recovery(job, RecoveryMode.NEVER, FIVE_MINUTES) == evolve(
        job, recovery_after=FIVE_MINUTES
    )
    with pytest.raises(
        ValueError, match=exactly("recovery applies to served workloads, not batch jobs")
    ):
        with_recovery(job, RecoveryMode.AUTOMATIC, FIVE_MINUTES)


@pytest.mark.parametrize(
    ("mode", "reason", "mode_after", "reason_after"),
    [
        # the reason belonged to the other choice: it follows the new one
        (
            RecoveryMode.AUTOMATIC,
            HeldReason.WAITING_FOR_DELAY,
            RecoveryMode.NEVER,
            HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
        ),
        (
            RecoveryMode.NEVER,
            HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
            RecoveryMode.AUTOMATIC,
            HeldReason.WAITING_FOR_DELAY,
        ),
        # the reason fits the new choice too: it stays
        (RecoveryMode.AUTOMATIC, HeldReason.CAPACITY, RecoveryMode.AUTOMATIC, HeldReason.CAPACITY),
    ],
)
def test_a_held_workloads_reason_follows_its_recovery_choice(
    mode: RecoveryMode, reason: HeldReason, mode_after: RecoveryMode, reason_after: HeldReason
) -> None:
    held = service(state=S.HELD, held_reason=reason, recovery_mode=mode)
    changed = with_recovery(held, mode_after, FIVE_MINUTES)
    assert changed == service(
        state=S.HELD,
        held_reason=reason_after,
        recovery_mode=mode_after,
        recovery_after=FIVE_MINUTES,
    )


def test_a_copy_is_kept_where_the_workload_would_go_even_when_that_card_is_full_today() -> None:
    two = fleet(machine("garage", gpu("G1", 24)), machine("attic", gpu("A1", 24)))
    full = Ledger(
        reservations=(Reservation(workload="big", machine="attic", gpu_uuid="A1", bytes=20 * GIB),)
    )
    v = view(fleet=two, ledger=full, excluded=(), verified_on=frozenset({"garage"}))
    assert copy_target(service(), request("svc"), v) == "attic"


def test_a_copy_is_kept_where_the_workload_would_go_on_a_view_that_keeps_its_index() -> None:
    kept = view(cards=FreeCards.of(FLEET, LEDGER, SchedulingSettings(), ENTERPRISE))
    assert copy_target(service(), request("svc"), kept) == "attic"


def test_a_recovery_decides_without_the_machine_its_workload_alone_held() -> None:
    v = view(cards=FreeCards.of(FLEET, LEDGER, SchedulingSettings(), ENTERPRISE))
    left = leaving(v, "svc")
    assert [m.name for m in left.fleet.machines] == ["attic", "cp"]
    assert left.ledger.reservations == ()
    assert left.cards is None


def test_a_recovery_decides_on_the_fleet_as_it_is_where_its_machine_holds_more() -> None:
    shared = fleet(machine("garage", gpu("G1", 24), gpu("G2", 24)), machine("attic", gpu("A1", 24)))
    both = LEDGER.added(Reservation(workload="other", machine="garage", gpu_uuid="G2", bytes=GIB))
    v = view(fleet=shared, ledger=both)
    assert leaving(v, "svc") is v
    assert leaving(v, "unknown") is v
