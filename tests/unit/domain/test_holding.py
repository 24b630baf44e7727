"""A workload held and resumed from its machine's health (domain/holding.py):
held since the machine went quiet, only once and only while it holds a card; resumed,
starting again, when its machine answers."""

from __future__ import annotations

from datetime import timedelta

from nodeau.domain.holding import held_while_away, resumed_on_return
from nodeau.domain.workloads import HeldReason, RecoveryMode, WorkloadState
from tests.support.builders.recovery_inputs import (
    DEGRADED,
    GONE,
    REPORTING,
    T0,
    record_of,
    service,
    unreachable_since,
)

S = WorkloadState
NEVER = RecoveryMode.NEVER


def test_a_service_set_to_never_is_held_since_its_machine_went_quiet() -> None:
    held = held_while_away(record_of(service(recovery_mode=NEVER)), unreachable_since(GONE))
    assert held == record_of(
        service(
            recovery_mode=NEVER,
            state=S.HELD,
            since=GONE,
            held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
        )
    )


def test_nothing_is_held_again_nor_on_a_machine_that_answers_nor_without_a_card() -> None:
    already = service(
        recovery_mode=NEVER, state=S.HELD, held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF
    )
    assert held_while_away(record_of(already), unreachable_since(GONE)) is None
    assert DEGRADED.since is not None
    assert held_while_away(record_of(service(recovery_mode=NEVER)), DEGRADED) is None
    stopped = service(recovery_mode=NEVER, state=S.STOPPED)
    assert held_while_away(record_of(stopped), unreachable_since(GONE)) is None


def test_a_held_service_starts_again_when_its_machine_answers() -> None:
    held = service(
        recovery_mode=NEVER, state=S.HELD, held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF
    )
    now = T0 + timedelta(minutes=1)
    resumed = resumed_on_return(record_of(held), REPORTING, now)
    assert resumed is not None
    w = resumed.workload
    assert (w.state, w.since, w.held_reason, w.machine) == (S.STARTING, now, None, "garage")
    assert resumed_on_return(record_of(held), unreachable_since(GONE), now) is None
    assert resumed_on_return(record_of(service()), REPORTING, now) is None
