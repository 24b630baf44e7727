"""``nodeau ps`` reached without cyclopts answers exactly as it does through cyclopts.

``main.run`` calls ``ps`` directly for ``ps`` and ``ps --json`` only: both ways over an empty home
and a real state database in every shape ``ps`` prints; any other arguments are cyclopts'.
"""

from __future__ import annotations

import inspect
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from attrs import evolve

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.cli import bootstrap, serving
from nodeau.apps.cli.main import build_app, run
from nodeau.apps.cli.ps_command import FAST_ARGV, fast_json, ps
from nodeau.domain.workloads import (
    HeldReason,
    Recovery,
    RecoveryMode,
    WorkloadKind,
    WorkloadState,
)
from nodeau.ports.state import WorkloadRecord
from tests.support.builders.admissions import MACHINE, decider, fleet_of

SINCE = datetime(2025, 3, 1, 9, 30, 5, tzinfo=UTC)
NOW = SINCE + timedelta(minutes=4, seconds=10)
HEADER = ["NAME", "KIND", "MODEL", "MACHINE", "GPU", "STATE"]


def served(port: int) -> Callable[[WorkloadRecord], WorkloadRecord]:
    def change(r: WorkloadRecord) -> WorkloadRecord:
        w = evolve(r.workload, state=WorkloadState.SERVING)
        return evolve(r, workload=w, endpoint_port=port)

    return change


def held(r: WorkloadRecord) -> WorkloadRecord:
    w = evolve(
        r.workload,
        state=WorkloadState.HELD,
        held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
    )
    return evolve(r, workload=w)


def recovering(r: WorkloadRecord) -> WorkloadRecord:
    w = evolve(
        r.workload,
        state=WorkloadState.RECOVERING,
        recovery_mode=RecoveryMode.AUTOMATIC,
        recoveries=1,
        last_recovery=Recovery(
            from_machine="m2",
            to_machine=r.workload.machine,
            at=SINCE,
            unreachable_since=SINCE - timedelta(minutes=3),
            after=timedelta(minutes=3),
        ),
    )
    return evolve(r, workload=w)


def batch_running(r: WorkloadRecord) -> WorkloadRecord:
    w = evolve(r.workload, kind=WorkloadKind.BATCH, state=WorkloadState.RUNNING)
    return evolve(r, workload=w)


def stopped(r: WorkloadRecord) -> WorkloadRecord:
    return evolve(r, workload=evolve(r.workload, state=WorkloadState.STOPPED))


def fill(state_path: Path, port: int) -> None:
    """Six workloads in the shapes ``ps`` prints; one stopped, so five are listed."""
    store = SqliteStateStore(state_path, lambda: SINCE)
    fleet = fleet_of(6)
    for name in ("chat", "held", "moving", "batch", "pulling", "gone"):
        store.admit(name, decider(name, fleet, SINCE)).unwrap()
    store.update("chat", served(port))
    store.update("held", held)
    store.update("moving", recovering)
    store.update("batch", batch_running)
    store.release("gone", stopped)


@pytest.fixture
def endpoint_port() -> Iterator[int]:
    """The port of a serving workload's endpoint: a real listening socket, as ``ps`` asks."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        yield listening.getsockname()[1]


@pytest.fixture(params=["empty", "filled"])
def home(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint_port: int,
) -> Path:
    """A Nodeau home with no database, or with a real one; simulated cards; a pinned clock."""
    monkeypatch.setenv("NODEAU_HOME", str(tmp_path))
    monkeypatch.setenv("NODEAU_MACHINE", MACHINE)
    monkeypatch.setenv("NODEAU_SIMULATED_GPUS", "6 x 24 GiB")
    monkeypatch.setattr(bootstrap, "utc_now", lambda: NOW)
    if request.param == "filled":
        fill(tmp_path / "state.sqlite3", endpoint_port)
    return tmp_path


Answer = tuple[object, str, str]


def answer(call: Callable[[], object], capsys: pytest.CaptureFixture[str]) -> Answer:
    """Exit code, stdout and stderr of a command line run in this process."""
    with pytest.raises(SystemExit) as exited:
        call()
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


def both_ways(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[Answer, Answer]:
    """``run(argv)`` and the cyclopts app given the same argv."""
    fast = answer(lambda: run(argv), capsys)
    through_cyclopts = answer(lambda: build_app()(list(argv)), capsys)
    return fast, through_cyclopts


def test_the_table_is_the_same_both_ways(
    home: Path, endpoint_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    fast, through_cyclopts = both_ways(["ps"], capsys)
    assert fast == through_cyclopts
    code, out, err = fast
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == HEADER
    if not (home / "state.sqlite3").exists():
        assert len(lines) == 1
        return
    by_name: dict[str, str] = {}  # each row with the lines beneath it (endpoint, sentence)
    name = ""
    for line in lines[1:]:
        if line.startswith("  "):
            by_name[name] += line
        else:
            name = line.split()[0]
            by_name[name] = line
    assert sorted(by_name) == ["batch", "chat", "held", "moving", "pulling"]
    assert all("(simulated)" in line for line in by_name.values())
    assert f"http://127.0.0.1:{endpoint_port}/v1" in by_name["chat"]
    assert "serving on m1 (GPU-0000…) since 09:30:05 (4m); nothing to do" in by_name["chat"]
    assert "held since 09:30:05 (4m): m1 stopped answering" in by_name["held"]
    assert f"recovering on {MACHINE} (" in by_name["moving"]
    assert "since 09:30:05 (4m): m2 stopped answering; " in by_name["moving"]
    assert " batch " in by_name["batch"] and " running " in by_name["batch"]
    assert "admitted on m1" in by_name["pulling"]


def test_the_json_is_the_same_both_ways(
    home: Path, endpoint_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    fast, through_cyclopts = both_ways(["ps", "--json"], capsys)
    assert fast == through_cyclopts
    code, out, err = fast
    assert (code, err) == (0, "")
    rows = json.loads(out)
    names = [r["name"] for r in rows]
    if (home / "state.sqlite3").exists():
        assert names == ["chat", "held", "moving", "batch", "pulling"]
        assert rows[0]["endpoint"] == f"http://127.0.0.1:{endpoint_port}/v1"
        assert rows[0]["sentence"].startswith("serving on m1 (GPU-0000…) since 09:30:05 (4m)")
    else:
        assert rows == []


def test_without_simulated_cards_the_gpu_is_not_labelled(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODEAU_SIMULATED_GPUS")
    fast, through_cyclopts = both_ways(["ps"], capsys)
    assert fast == through_cyclopts
    code, out, _ = fast
    assert code == 0 and "(simulated)" not in out
    if (home / "state.sqlite3").exists():
        assert "GPU-0000  " in out


@pytest.mark.parametrize("argv", sorted(FAST_ARGV))
def test_the_fast_argument_lists_mean_what_cyclopts_reads(argv: tuple[str, ...]) -> None:
    command, bound, ignored = build_app().parse_args(list(argv))
    bound.apply_defaults()
    assert command is serving.ps and not ignored
    assert dict(bound.arguments) == {"json": fast_json(argv), "output": None}
    # cyclopts' ps passes every option on to the one the fast path calls
    assert list(inspect.signature(ps).parameters) == list(bound.arguments)


@pytest.mark.parametrize(
    "argv",
    [
        ["ps", "--help"],
        ["ps", "-h"],
        ["ps", "--no-json"],
        ["ps", "--json=true"],
        ["ps", "--jsn"],
        ["ps", "--json", "extra"],
        ["ps", "ps"],
        ["ps", "--json", "--json"],
        ["--json", "ps"],
        ["PS"],
    ],
)
def test_every_other_argument_list_is_answered_by_cyclopts(
    argv: list[str], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fast_json(argv) is None
    fast, through_cyclopts = both_ways(argv, capsys)
    assert fast == through_cyclopts


def test_help_and_a_wrong_flag_behave_as_a_command_line_should(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = answer(lambda: run(["ps", "--help"]), capsys)
    assert code == 0 and "Print the rows as JSON." in out
    code, out, err = answer(lambda: run(["ps", "--jsn"]), capsys)
    assert code != 0 and "--jsn" in out + err and "Traceback" not in err


# Plain ps on an empty home needs no JSON converter; --json prints "[]" through cattrs.
@pytest.mark.parametrize(
    ("args", "unloaded", "expected_stdout"),
    [
        (["ps"], ("cyclopts", "rich", "sqlite3", "cattrs", "returns"), None),
        (["ps", "--json"], ("cyclopts", "rich", "sqlite3"), "[]"),
    ],
)
def test_ps_on_an_empty_home_imports_no_cyclopts_and_creates_no_database(
    tmp_path: Path, args: list[str], unloaded: tuple[str, ...], expected_stdout: str | None
) -> None:
    probe = (
        "import sys\n"
        "from nodeau.apps.cli.main import run\n"
        "try:\n"
        f"    run({args!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {unloaded!r})\n"
        "print(repr((code, loaded)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={"NODEAU_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.stderr.strip() == "(0, [])"
    if expected_stdout is None:
        assert done.stdout.split() == HEADER
    else:
        assert done.stdout.strip() == expected_stdout
    assert list(tmp_path.iterdir()) == []
