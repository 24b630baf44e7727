"""Nodeau Cloud, decided: what may leave, which operations may run, when to reach out.

Why it is so: docs/adr/decisions/domain.md (cloud.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from attrs import frozen
from returns.result import Failure, Result, Success

SLOW_DOWN = timedelta(seconds=5)  # RFC 8628 3.5: each slow_down adds 5 seconds


class OperationKind(str, enum.Enum):
    """What the cloud may ask a connected fleet to do, when the person allowed it."""

    DRAIN = "drain"  # place nothing new on a machine; nothing running is touched
    UNDRAIN = "undrain"  # take new placements there again
    STOP_BATCH = "stop-batch"  # stop a batch job and free its card; results stay
    STOP_SERVICE = "stop-service"  # stop a service (endpoint and model), freeing its card


KINDS = ", ".join(k.value for k in OperationKind)
TARGET_SHAPE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9._]{0,251}[A-Za-z0-9])?$")


def parse_allowed(text: str) -> Result[frozenset[OperationKind], str]:
    """``--allow stop-batch,drain`` as a set; an unknown word is one line naming the choices."""
    chosen: set[OperationKind] = set()
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        try:
            chosen.add(OperationKind(word))
        except ValueError:
            return Failure(f"--allow: {word!r} is not an operation; choose from {KINDS}")
    return Success(frozenset(chosen))


class Verdict(str, enum.Enum):
    """What was decided about one operation the cloud asked for."""

    ALLOWED = "allowed"
    NOT_ALLOWED = "not-allowed"  # a known kind the person did not allow at connect
    UNKNOWN = "unknown-operation"  # nothing Nodeau can do, whatever was allowed
    BAD_TARGET = "bad-target"  # the target is not a machine or workload name


@frozen(kw_only=True)
class RemoteOperation:
    """One operation as the cloud sent it; ``kind`` is its text, which may name anything."""

    id: str
    kind: str
    target: str


@frozen(kw_only=True)
class OperationDecision:
    """Whether one operation runs, and the sentence recorded for it."""

    operation: RemoteOperation
    verdict: Verdict
    kind: OperationKind | None  # set when allowed
    sentence: str

    @property
    def allowed(self) -> bool:
        return self.verdict is Verdict.ALLOWED


def decide_operation(
    operation: RemoteOperation, allowed: frozenset[OperationKind]
) -> OperationDecision:
    """Whether ``operation`` may run: only a kind the person allowed, on a well-formed name."""
    try:
        kind = OperationKind(operation.kind)
    except ValueError:
        return OperationDecision(
            operation=operation,
            verdict=Verdict.UNKNOWN,
            kind=None,
            sentence=(
                f"refused {operation.kind!r}: Nodeau Cloud can only ask for {KINDS};"
                " nothing was run"
            ),
        )
    if kind not in allowed:
        chosen = ", ".join(sorted(k.value for k in allowed)) or "none"
        return OperationDecision(
            operation=operation,
            verdict=Verdict.NOT_ALLOWED,
            kind=None,
            sentence=(
                f"refused {kind.value} {operation.target!r}: not allowed when this fleet was"
                f" connected (allowed: {chosen}; reconnect with --allow to change it);"
                " nothing was run"
            ),
        )
    if TARGET_SHAPE.match(operation.target) is None:
        return OperationDecision(
            operation=operation,
            verdict=Verdict.BAD_TARGET,
            kind=None,
            sentence=(
                f"refused {kind.value} {operation.target!r}: not a machine or workload name;"
                " nothing was run"
            ),
        )
    return OperationDecision(
        operation=operation,
        verdict=Verdict.ALLOWED,
        kind=kind,
        sentence=f"{kind.value} {operation.target}: allowed at connect",
    )


# --- what may leave -------------------------------------------------------------------

MACHINE_FIELDS = ("machine", "health", "drained", "upgrading", "control_plane", "simulated")
GPU_FIELDS = ("uuid", "model", "total_bytes", "held_by", "reserved_bytes")
WORKLOAD_FIELDS = ("name", "kind", "model", "machine", "gpu", "simulated", "state", "since")

Scalar = str | int | float | bool | None


def scalar(value: object, where: str) -> Scalar:
    """A value that may be sent as it is (a moment as ISO 8601 text); else ``ValueError``."""
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"{where} is not a plain value ({type(value).__name__}); it is not sent")


def allowed_fields(
    view: Mapping[str, object], fields: Sequence[str], where: str
) -> dict[str, Scalar]:
    """Exactly the allow-listed ``fields`` of ``view`` (a missing one is None)."""
    return {name: scalar(view.get(name), f"{where}.{name}") for name in fields}


def machine_entry(machine: Mapping[str, object]) -> dict[str, object]:
    """One machine and its GPUs, by the allow-lists."""
    entry: dict[str, object] = dict(allowed_fields(machine, MACHINE_FIELDS, "machine"))
    gpus = machine.get("gpus", ())
    if not isinstance(gpus, Iterable) or isinstance(gpus, str | bytes | Mapping):
        raise ValueError("machine.gpus is not a list of GPUs; it is not sent")
    picked = []
    for gpu in gpus:
        if not isinstance(gpu, Mapping):
            raise ValueError("machine.gpus holds something that is not a GPU; it is not sent")
        picked.append(allowed_fields(gpu, GPU_FIELDS, "gpu"))
    entry["gpus"] = picked
    return entry


def metadata_report(
    installation_id: str,
    machines: Iterable[Mapping[str, object]],
    workloads: Iterable[Mapping[str, object]],
    at: datetime,
) -> dict[str, object]:
    """The report a connected fleet sends: metadata by allow-list, nothing computed."""
    return {
        "installation": installation_id,
        "at": at.isoformat(),
        "machines": [machine_entry(m) for m in machines],
        "workloads": [allowed_fields(w, WORKLOAD_FIELDS, "workload") for w in workloads],
    }


# --- sign-in --------------------------------------------------------------------------


class SignInState(str, enum.Enum):
    """The cloud's answer to one poll of a device-code sign-in."""

    PENDING = "authorization_pending"
    SLOW_DOWN = "slow_down"
    APPROVED = "approved"
    DENIED = "access_denied"
    EXPIRED = "expired_token"


def next_interval(state: SignInState, interval: timedelta) -> timedelta:
    """How long to wait before the next poll after ``state``."""
    return interval + SLOW_DOWN if state is SignInState.SLOW_DOWN else interval


def sign_in_ended(state: SignInState) -> str | None:
    """Why a sign-in ended without an account, or None while it can still be approved."""
    if state is SignInState.DENIED:
        return "the sign-in was declined in the browser"
    if state is SignInState.EXPIRED:
        return "the code expired before it was approved"
    return None


# --- the association and the record of calls ------------------------------------------


@frozen(kw_only=True)
class Association:
    """This installation's link to a Nodeau Cloud account, as sign-in gave it."""

    base_url: str
    account: str  # the account's name as the cloud gives it, for a person
    installation_id: str  # as the cloud registered it (this installation's id)
    token: str  # the credential for later calls; a secret, never shown
    connected_at: datetime
    fleet: bool  # reports and operation polls on a schedule
    allowed: frozenset[OperationKind]


class CallPurpose(str, enum.Enum):
    """Why Nodeau reached out."""

    SIGN_IN = "sign-in"
    SIGN_IN_POLL = "sign-in poll"
    REPORT = "report"
    OPERATIONS = "operations poll"
    OUTCOME = "operation outcome"
    DISCONNECT = "disconnect"


@frozen(kw_only=True)
class OutboundCall:
    """One call Nodeau made: when, where, what for, body bytes each way, how it went."""

    at: datetime
    method: str
    url: str
    purpose: CallPurpose
    bytes_sent: int
    bytes_received: int
    status: int | None  # the HTTP status, when an answer came
    failure: str | None  # why it failed (no answer, a timeout, a 5xx...), None when it did not

    @property
    def ok(self) -> bool:
        return self.failure is None


@frozen(kw_only=True)
class CallTotals:
    """What ``nodeau cloud status`` sums up over the calls."""

    calls: int
    failed: int
    bytes_sent: int
    bytes_received: int
    last_ok: datetime | None
    last_failed: datetime | None


def call_totals(calls: Sequence[OutboundCall]) -> CallTotals:
    ok = [c.at for c in calls if c.ok]
    bad = [c.at for c in calls if not c.ok]
    return CallTotals(
        calls=len(calls),
        failed=len(bad),
        bytes_sent=sum(c.bytes_sent for c in calls),
        bytes_received=sum(c.bytes_received for c in calls),
        last_ok=max(ok, default=None),
        last_failed=max(bad, default=None),
    )


@frozen(kw_only=True)
class OperationRecord:
    """One operation the cloud asked for, what was decided, and how it ended."""

    at: datetime
    id: str
    kind: str
    target: str
    verdict: Verdict
    outcome: str  # "done", "failed" or "refused"
    sentence: str


# --- the schedule ---------------------------------------------------------------------


def due(last: datetime | None, interval: timedelta, now: datetime) -> bool:
    """Whether a call tried last at ``last`` is due again at ``now``."""
    return last is None or now - last >= interval


def next_due(last: datetime | None, interval: timedelta, now: datetime) -> datetime:
    return now if last is None else max(now, last + interval)
