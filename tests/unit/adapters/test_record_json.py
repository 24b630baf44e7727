"""The JSON form every store keeps, and its packed form for large records."""

from __future__ import annotations

import base64
import gzip
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.record_json import RecordError, dumps, loads, pack, to_plain, unpack
from nodeau.domain.health import Health, MachineHealth, Signal
from nodeau.domain.reservations import Reservation

HEALTH = MachineHealth(
    state=Health.UNREACHABLE,
    since=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
    quiet=frozenset(Signal),
    sentence="unreachable since 12:00: both signals quiet",
)

reservations = st.builds(
    Reservation,
    workload=st.text(min_size=1, max_size=20),
    machine=st.text(min_size=1, max_size=20),
    gpu_uuid=st.text(min_size=1, max_size=40),
    bytes=st.integers(min_value=1, max_value=2**62),
)


def test_sets_are_sorted_lists_and_read_back_as_sets() -> None:
    plain = to_plain(HEALTH, MachineHealth)
    assert plain["quiet"] == sorted(s.value for s in Signal)
    assert loads(dumps(HEALTH, MachineHealth), MachineHealth, "health") == HEALTH


@given(st.lists(reservations, max_size=50).map(tuple))
def test_a_packed_record_reads_back_unchanged(held: tuple[Reservation, ...]) -> None:
    text = pack(held, tuple[Reservation, ...])
    assert text.isascii()
    assert unpack(text, tuple[Reservation, ...], "the ledger") == held


def test_packing_is_the_compact_json_gzipped_in_base64() -> None:
    text = pack(HEALTH, MachineHealth)
    raw = gzip.decompress(base64.b64decode(text))
    assert json.loads(raw) == to_plain(HEALTH, MachineHealth)
    assert pack(HEALTH, MachineHealth) == text  # no timestamp inside: the same value, the same text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not base64!", "is not packed JSON"),
        (base64.b64encode(b"plain bytes").decode(), "is not packed JSON"),
        (base64.b64encode(gzip.compress(b"{oops", mtime=0)).decode(), "is not JSON"),
        (
            base64.b64encode(gzip.compress(b'{"state": "gone"}', mtime=0)).decode(),
            "is not a readable record",
        ),
    ],
)
def test_a_damaged_packed_record_is_a_record_error_naming_it(text: str, why: str) -> None:
    with pytest.raises(RecordError, match=f"the health of m1 {why}"):
        unpack(text, MachineHealth, "the health of m1")


def outcome(text: str) -> str:
    """What unpacking gives: the record's type, or RecordError (anything else escapes)."""
    try:
        return type(unpack(text, MachineHealth, "junk")).__name__
    except RecordError:
        return "RecordError"


@given(st.binary(max_size=200))
def test_any_bytes_unpack_to_a_record_or_a_record_error(junk: bytes) -> None:
    for text in (base64.b64encode(junk).decode(), base64.b64encode(gzip.compress(junk)).decode()):
        assert outcome(text) in {"MachineHealth", "RecordError"}


def test_durations_are_seconds() -> None:
    assert to_plain(timedelta(minutes=3), timedelta) == 180.0
