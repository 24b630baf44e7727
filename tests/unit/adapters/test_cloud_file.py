"""What this machine keeps of Nodeau Cloud: the association (owner-only), and the records of
calls and operations, appended and read back exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nodeau.adapters.cloud_file import FileCloudState
from nodeau.domain.cloud import (
    Association,
    CallPurpose,
    OperationKind,
    OperationRecord,
    OutboundCall,
    Verdict,
)
from nodeau.ports.cloud import CloudStateError

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ASSOCIATION = Association(
    base_url="https://api.nodeau.ai",
    account="Test Organisation",
    installation_id="0123abcd",
    token="s3cret",
    connected_at=T0,
    fleet=True,
    allowed=frozenset({OperationKind.DRAIN, OperationKind.STOP_BATCH}),
)


def call(n: int, failure: str | None = None) -> OutboundCall:
    return OutboundCall(
        at=T0 + timedelta(seconds=n),
        method="POST",
        url="https://api.nodeau.ai/v1/installations/0123abcd/reports",
        purpose=CallPurpose.REPORT,
        bytes_sent=100 + n,
        bytes_received=0,
        status=None if failure else 204,
        failure=failure,
    )


def test_the_association_is_kept_whole_for_its_owner_only_and_forgotten(tmp_path: Path) -> None:
    state = FileCloudState(tmp_path)
    assert state.association() is None
    state.keep(ASSOCIATION)
    assert state.association() == ASSOCIATION
    path = tmp_path / "cloud" / "association.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    assert state.forget() is True
    assert state.association() is None
    assert state.forget() is False


def test_calls_and_operations_are_appended_and_read_back_in_order(tmp_path: Path) -> None:
    state = FileCloudState(tmp_path)
    assert state.calls() == () and state.operations() == ()
    calls = [call(1), call(2, "answered 500"), call(3, "timed out after 10 s")]
    for c in calls:
        state.record_call(c)
    record = OperationRecord(
        at=T0,
        id="op-1",
        kind="shell",
        target="x",
        verdict=Verdict.UNKNOWN,
        outcome="refused",
        sentence="refused 'shell'",
    )
    state.record_operation(record)
    state.forget()  # the records outlive the association
    assert state.calls() == tuple(calls)
    assert state.operations() == (record,)


def test_a_line_cut_short_is_left_out_and_a_broken_one_is_named(tmp_path: Path) -> None:
    state = FileCloudState(tmp_path)
    state.record_call(call(1))
    path = tmp_path / "cloud" / "calls.jsonl"
    with path.open("ab") as f:
        f.write(b'{"at": "2026-')  # a write that never finished
    assert state.calls() == (call(1),)
    path.write_bytes(path.read_bytes() + b'\n{"at": 1}\n')
    with pytest.raises(CloudStateError, match=r"calls\.jsonl line 2 does not read"):
        state.calls()
    (tmp_path / "cloud" / "association.json").write_text('{"base_url": "x"}')
    with pytest.raises(CloudStateError, match=r"association\.json does not read"):
        state.association()
