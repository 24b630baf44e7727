"""``nodeau recovery set|status`` as a person types them, in this process: the command line
goes through ``main.run`` (cyclopts, the one-line errors, the exit codes) to a plane built
over the contract-checked fakes (``bootstrap.plane`` answers with it)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from attrs import evolve

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.main import run
from nodeau.apps.cli.render import to_json
from nodeau.apps.cli.serving import parse_after
from nodeau.apps.planes.plane import Plane
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from nodeau.ports.errors import SettingsError
from tests.support.fakes.fleet_stories import Fleet
from tests.support.fakes.machine_plane import ask, plane_with

AUTO = RecoveryMode.AUTOMATIC


def nodeau(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], plane: Plane, *argv: str
) -> tuple[int, str, str]:
    """Run ``nodeau ARGV`` on ``plane``: its exit code, stdout and stderr."""
    monkeypatch.setattr(bootstrap, "plane", lambda: plane)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run(list(argv))
    out = capsys.readouterr()
    code = exited.value.code
    return (0 if code is None else int(code)), out.out, out.err


def test_set_prints_the_planes_sentence_and_records_the_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    code, out, err = nodeau(
        monkeypatch, capsys, plane, "recovery", "set", "tiny", "automatic", "--after", "10m"
    )
    assert (code, err) == (0, "")
    assert out == "tiny: recovery is now automatic after 10m (was never); nothing restarts\n"
    found = parts.state.snapshot().named("tiny")
    assert found is not None
    assert (found.workload.recovery_mode, found.workload.recovery_after) == (
        AUTO,
        timedelta(minutes=10),
    )


def test_automatic_without_after_is_three_minutes_and_never_takes_no_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    code, out, _ = nodeau(monkeypatch, capsys, plane, "recovery", "set", "tiny", "automatic")
    assert code == 0 and "automatic after 3m" in out
    code, out, err = nodeau(
        monkeypatch, capsys, plane, "recovery", "set", "tiny", "never", "--after", "5m"
    )
    assert (code, out) == (1, "")
    assert err == (
        "nodeau: --after '5m' applies to automatic recovery; a service set to never waits for "
        "its machine however long (leave --after out)\n"
    )
    found = parts.state.snapshot().named("tiny")
    assert found is not None and found.workload.recovery_mode is AUTO  # nothing was changed
    code, out, _ = nodeau(monkeypatch, capsys, plane, "recovery", "set", "tiny", "never")
    assert code == 0 and out.startswith("tiny: recovery is now never (was automatic after 3m)")


@pytest.mark.parametrize("after", ["10x", "0m", "m", "1.5h"])
def test_a_bad_delay_is_the_same_error_run_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], after: str
) -> None:
    plane, _ = plane_with(tmp_path)
    plane.serving.run(ask())
    with pytest.raises(SettingsError) as expected:
        parse_after(after)
    code, out, err = nodeau(
        monkeypatch, capsys, plane, "recovery", "set", "tiny", "automatic", "--after", after
    )
    assert (code, out) == (1, "")
    assert err == f"nodeau: {expected.value.one_line()}\n"


def test_a_batch_job_or_an_unknown_name_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = Fleet("m1")
    f.cluster.objects.create(WorkloadAsk(kind=WorkloadKind.BATCH, name="nightly", model="qwen"))
    code, out, err = nodeau(monkeypatch, capsys, f.plane, "recovery", "set", "nightly", "automatic")
    assert (code, out) == (1, "")
    assert err == "nodeau: recovery applies to served workloads; nightly is a batch job\n"
    code, _, err = nodeau(monkeypatch, capsys, f.plane, "recovery", "set", "nope", "never")
    assert code == 1 and err.startswith("nodeau: no workload called 'nope'") and err[-1] == "\n"
    assert err.count("\n") == 1


def test_status_is_a_table_then_what_is_happening_to_each_service(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = Fleet("m1", "m2", "m3")
    f.serve(recovery=AUTO, recovery_after=timedelta(seconds=60))  # on m1
    f.serve("steady")  # on m2 (each machine has one card)
    f.quiet.add("m1")
    for _ in range(30):
        f.tick()
        if f.row().machine != "m1":
            break
    listing = f.plane.recovery.status()
    chat = f.row()
    assert chat.sentence is not None and chat.last_recovery is not None
    code, out, err = nodeau(monkeypatch, capsys, f.plane, "recovery", "status")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == [f"plane: {listing.plane}", f"control plane: {listing.control_plane}"]
    header, *rows = lines[2:5]
    assert header.split() == ["NAME", "MACHINE", "STATE", "RECOVERY", "COPIES", "LAST", "RECOVERY"]
    by_name = {r.split()[0]: r for r in rows}
    assert "recovering" in by_name["chat"] and "m1 -> m3" in by_name["chat"]
    assert "automatic after 1m" in by_name["chat"] and "m1, m2, m3" in by_name["chat"]
    assert by_name["steady"].split()[-1] == "-"  # never recovered
    assert lines[5:] == [
        "now:",
        *[f"  {v.name}: {v.sentence}" for v in listing.services if v.sentence],
        "last recoveries:",
        f"  chat: {chat.last_recovery.sentence}",
    ]


def test_status_json_is_the_view_with_the_same_keys_on_both_planes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = Fleet("m1")
    f.serve()
    code, out, _ = nodeau(monkeypatch, capsys, f.plane, "recovery", "status", "--json")
    assert code == 0 and json.loads(out) == json.loads(to_json(f.plane.recovery.status()))
    plane, _ = plane_with(tmp_path)
    plane.serving.run(evolve(ask(), recovery=AUTO))
    code, out, _ = nodeau(monkeypatch, capsys, plane, "recovery", "status", "--json")
    doc = json.loads(out)
    assert code == 0 and doc == json.loads(to_json(plane.recovery.status()))
    assert (
        doc["services"][0]["note"]
        == "this machine is the only one: recovery has nowhere to move it"
    )
    code, out, _ = nodeau(monkeypatch, capsys, plane, "recovery", "status")
    assert out.splitlines()[-2:] == [
        "notes:",
        "  tiny: this machine is the only one: recovery has nowhere to move it",
    ]
