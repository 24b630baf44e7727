"""``nodeau cloud status``: whether this installation reaches out, to whom, and every call.

The view carries what a person reads and never the credential. Every outbound call is
in it, failed or not, with its size each way; a cloud outage shows as failed calls and
nothing else.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from attrs import frozen

from nodeau.domain.cloud import CallTotals, OperationRecord, OutboundCall, call_totals
from nodeau.ports.cloud import CloudState


@frozen(kw_only=True)
class CloudStatus:
    """``nodeau cloud status``, the same keys whether connected or not."""

    connected: bool
    url: str | None
    account: str | None
    installation_id: str | None
    connected_at: datetime | None
    fleet: bool
    allowed: tuple[str, ...]
    reporter_pid: int | None  # the reporter's pid while it runs
    report_interval_s: float
    poll_interval_s: float
    totals: CallTotals
    calls: tuple[OutboundCall, ...]
    operations: tuple[OperationRecord, ...]
    kept_in: str


def cloud_status(
    state: CloudState,
    reporter_pid: int | None,
    report_interval: timedelta,
    poll_interval: timedelta,
) -> CloudStatus:
    association = state.association()
    calls = state.calls()
    return CloudStatus(
        connected=association is not None,
        url=None if association is None else association.base_url,
        account=None if association is None else association.account,
        installation_id=None if association is None else association.installation_id,
        connected_at=None if association is None else association.connected_at,
        fleet=association is not None and association.fleet,
        allowed=() if association is None else tuple(sorted(k.value for k in association.allowed)),
        reporter_pid=reporter_pid,
        report_interval_s=report_interval.total_seconds(),
        poll_interval_s=poll_interval.total_seconds(),
        totals=call_totals(calls),
        calls=calls,
        operations=state.operations(),
        kept_in=state.where,
    )
