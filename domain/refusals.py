"""Refusals: the kinds of "no", each with a stable reason code and a sentence.

Why it is so: docs/adr/decisions/domain.md (refusals.py).
"""

from __future__ import annotations

import enum

from attrs import frozen


class RefusalKind(str, enum.Enum):
    """Which kind of refusal this is."""

    CAPACITY = "capacity"
    LIMIT = "limit"
    QUOTA = "quota"
    PERMISSION = "permission"
    QUALIFICATION = "qualification"


class ReasonCode(str, enum.Enum):
    """Stable codes that cross every boundary (CLI output, JSON, status conditions).

    The value is the code; never renumber or reword one, add new ones.
    """

    # capacity: the hardware or the files cannot take it
    NO_CARD_LARGE_ENOUGH = "capacity.no-card-large-enough"
    NO_FREE_CARD = "capacity.no-free-card"
    NO_VERIFIED_COPY = "capacity.no-verified-copy"
    NO_ELIGIBLE_MACHINE = "capacity.no-eligible-machine"
    CARD_HELD = "capacity.card-held"
    CARD_TOO_SMALL = "capacity.card-too-small"
    SERVER_CANNOT_USE_CARD = "capacity.server-cannot-use-card"
    # limit: a fixed bound on the shape of a request (plan or organisation)
    CONTEXT_OVER_LIMIT = "limit.context-over-limit"
    MODEL_SIZE_OVER_LIMIT = "limit.model-size-over-limit"
    MACHINES_OVER_PLAN = "limit.machines-over-plan"
    GPUS_OVER_PLAN = "limit.gpus-over-plan"
    FEATURE_NOT_IN_PLAN = "limit.feature-not-in-plan"
    MACHINE_NOT_ALLOWED = "limit.machine-not-allowed"
    # quota: a budget the organisation has already spent
    GPU_QUOTA_EXHAUSTED = "quota.gpus-exhausted"
    WORKLOAD_QUOTA_EXHAUSTED = "quota.workloads-exhausted"
    # permission: who is asking may not do this
    ROLE_MAY_NOT = "permission.role-may-not"
    MODEL_NOT_PERMITTED = "permission.model-not-permitted"
    REQUESTER_UNKNOWN = "permission.requester-unknown"
    # qualification: an imported model has not proved the capability the task needs
    TASK_NOT_PROVED = "qualification.task-not-proved"


@frozen(kw_only=True)
class Refusal:
    """An expected "no": its kind, its stable code and one sentence for a person."""

    kind: RefusalKind
    code: ReasonCode
    sentence: str

    def __attrs_post_init__(self) -> None:
        if not self.code.value.startswith(self.kind.value + "."):
            raise ValueError(f"reason code {self.code.value} is not a {self.kind.value} code")

    @classmethod
    def of(cls, code: ReasonCode, sentence: str) -> Refusal:
        """A refusal whose kind is read off its code, so the two can never disagree."""
        return cls(kind=RefusalKind(code.value.split(".", 1)[0]), code=code, sentence=sentence)
