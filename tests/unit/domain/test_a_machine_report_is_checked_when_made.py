"""A machine's report is refused when made with a naive moment or a malformed artifact id,
and the agent report it makes carries its moment and is no control plane unless told."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from nodeau.domain.fleet_reports import MachineArtifact, MachineReport
from nodeau.domain.hardware import MachineReading
from tests.support.builders.summaries import SUMMARY

AT = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
READING = MachineReading(machine="m1", gpus=(), simulated=True, note="simulated")


def test_a_report_at_a_naive_moment_is_refused() -> None:
    naive = datetime(2026, 12, 5, 9, 30)
    message = "a report's moment must carry a timezone, got 2026-12-05T09:30:00"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MachineReport(reading=READING, at=naive)


def test_an_artifact_id_that_is_not_64_lowercase_hex_digits_is_refused() -> None:
    message = "an artifact id is 64 lowercase hex digits, got 'ABC'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MachineArtifact(id="ABC", names=(), size_bytes=1, path="/m", summary=SUMMARY)


def test_the_agent_report_carries_the_moment_and_is_no_control_plane_unless_told() -> None:
    report = MachineReport(reading=READING, at=AT)
    plain = report.as_agent_report()
    assert (plain.machine, plain.reported_at, plain.control_plane) == ("m1", AT, False)
    assert report.as_agent_report(control_plane=True).control_plane is True
    assert report.machine == "m1"
