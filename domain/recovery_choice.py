"""A person's recovery choice for a service, and the sentence that says what changing it did.

Why it is so: docs/adr/decisions/domain.md (recovery_choice.py).
"""

from __future__ import annotations

from datetime import timedelta

from attrs import frozen

from nodeau.domain.workloads import RecoveryMode, WorkloadKind, recovery_words


@frozen(kw_only=True)
class RecoveryChange:
    """A service's recovery choice before and after a person set it, in words."""

    workload: str
    was: str  # "never", "automatic after 3m"
    now: str

    @property
    def changed(self) -> bool:
        return self.was != self.now

    @property
    def sentence(self) -> str:
        """What ``nodeau recovery set`` prints."""
        if not self.changed:
            return f"{self.workload}: recovery is already {self.now}; nothing changed"
        return f"{self.workload}: recovery is now {self.now} (was {self.was}); nothing restarts"


def recovery_change(
    workload: str,
    kind: WorkloadKind,
    was: tuple[RecoveryMode, timedelta],
    now: tuple[RecoveryMode, timedelta],
) -> RecoveryChange:
    """The change from choice ``was`` to choice ``now`` (each a mode and a delay).

    ValueError for a batch job, or a delay that is not positive.
    """
    if kind is not WorkloadKind.SERVICE:
        raise ValueError(f"recovery applies to served workloads; {workload} is a batch job")
    if now[1] <= timedelta(0):
        raise ValueError(f"a recovery delay is positive, got {now[1]}")
    return RecoveryChange(workload=workload, was=recovery_words(*was), now=recovery_words(*now))
