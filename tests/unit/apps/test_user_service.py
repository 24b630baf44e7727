"""The endpoint as a user service: the systemd unit and launchd agent, their names, the fallback.

The systemd unit's parsed content is always checked, and ``systemd-analyze --user verify`` loads
it where it exists; the supervised process itself runs in tests/integration/test_endpoint.py.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nodeau.adapters.service_specs import EndpointServiceSpec, check_name
from nodeau.adapters.supervised_process import BackgroundProcess
from nodeau.adapters.user_service import (
    SANDBOX,
    LaunchdAgent,
    Probe,
    ServiceError,
    SystemdUserService,
    choose_service_manager,
    launchd_label,
    launchd_plist,
    pick_service_manager,
    probe_systemd,
    systemd_unit,
    unit_name,
)
from tests.support.builders.unit_files import exec_start_argv, sections

PYTHON = Path(sys.executable)


def has_systemd_analyze() -> bool:
    """Whether ``systemd-analyze`` is here to verify units; under CI=true its absence is a
    failure, not a quiet skip (scripts/test installs Debian's systemd there)."""
    if shutil.which("systemd-analyze"):
        return True
    if os.environ.get("CI") == "true":
        pytest.fail("systemd-analyze is missing: apt-get install systemd (scripts/test does)")
    return False


def spec_for(tmp_path: Path, **changes: object) -> EndpointServiceSpec:
    values: dict[str, object] = {
        "workload": "qwen-chat",
        "port": 18123,
        "state_path": tmp_path / "nodeau" / "state.sqlite3",
        "log_path": tmp_path / "nodeau" / "logs" / "endpoint-qwen-chat.log",
        "python": PYTHON,
    }
    values.update(changes)
    return EndpointServiceSpec(**values)  # type: ignore[arg-type]


def verify_unit(tmp_path: Path, spec: EndpointServiceSpec) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze --user verify`` of the unit; its stderr keeps only what names our unit.

    systemd also loads the machine's own user units (gpg-agent sockets and the like) and
    complains about them; those lines say nothing of ours and depend on the machine.
    """
    unit = tmp_path / "units" / unit_name(spec.workload)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(systemd_unit(spec))
    # a short runtime folder: socket paths under it must fit in 108 bytes
    runtime = Path(tempfile.mkdtemp(prefix="nodeau-rt-", dir="/tmp"))
    try:
        done = subprocess.run(
            ["systemd-analyze", "--user", "verify", str(unit)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
            check=False,
        )
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    ours = [line for line in done.stderr.splitlines() if unit.name in line or str(unit) in line]
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout, "".join(f"{line}\n" for line in ours)
    )


# -- systemd


def test_the_systemd_unit_runs_the_endpoint_and_restarts_it_boundedly(tmp_path: Path) -> None:
    """Parsed content always; ``systemd-analyze --user verify`` too where it exists."""
    spec = spec_for(tmp_path)
    unit = sections(systemd_unit(spec))
    assert unit["Unit"] == {
        "Description": "Nodeau endpoint of workload qwen-chat on 127.0.0.1:18123",
        "StartLimitIntervalSec": "60",
        "StartLimitBurst": "5",
    }
    service = unit["Service"]
    assert exec_start_argv(service.pop("ExecStart")) == list(spec.command)
    assert service == {
        "Type": "exec",
        "Restart": "on-failure",
        "RestartSec": "1",
        "KillMode": "process",  # a model server the endpoint restarted outlives its stop
        "TimeoutStopSec": "10",
        "Environment": "PYTHONUNBUFFERED=1",
        "StandardOutput": f"append:{spec.log_path}",
        "StandardError": "inherit",
        **dict(SANDBOX),  # what it proves: tests/integration/test_units_are_hardened.py
    }
    assert "Install" not in unit  # never enabled: nodeau starts it with the model
    assert spec.command[1:] == (
        "-m", "nodeau.apps.endpoint",
        "--workload", "qwen-chat",
        "--port", "18123",
        "--state", str(spec.state_path),
    )  # fmt: skip
    if has_systemd_analyze():
        verified = verify_unit(tmp_path, spec)
        assert (verified.returncode, verified.stderr) == (0, "")


def test_odd_characters_in_paths_survive_the_unit(tmp_path: Path) -> None:
    """Spaces, ``%``, ``$``, quotes and backslashes in paths come back as they were
    (``systemd-analyze`` also checks the quoted interpreter path exists, where it exists)."""
    odd = tmp_path / "my venv 100%"
    odd.mkdir()
    (odd / "python").symlink_to(PYTHON)
    spec = spec_for(
        tmp_path,
        python=odd / "python",
        state_path=tmp_path / 'a "b" \\c $HOME %i' / "state.sqlite3",
        log_path=tmp_path / "logs 50%" / "endpoint.log",
    )
    service = sections(systemd_unit(spec))["Service"]
    assert exec_start_argv(service["ExecStart"]) == list(spec.command)
    assert service["StandardOutput"] == f"append:{str(spec.log_path).replace('%', '%%')}"
    if has_systemd_analyze():
        verified = verify_unit(tmp_path, spec)
        assert (verified.returncode, verified.stderr) == (0, "")


def test_systemd_analyze_rejects_a_unit_whose_interpreter_is_missing(tmp_path: Path) -> None:
    """The verification can fail: a unit naming a missing interpreter does not pass (where
    ``systemd-analyze`` exists; elsewhere the spec's absolute path is what is checked)."""
    spec = spec_for(tmp_path, python=tmp_path / "gone" / "python")
    assert sections(systemd_unit(spec))["Service"]["ExecStart"].startswith(
        f"{tmp_path}/gone/python "
    )
    if has_systemd_analyze():
        verified = verify_unit(tmp_path, spec)
        assert verified.returncode != 0
        assert "is not executable" in verified.stderr


def test_the_systemd_manager_names_its_units_in_its_folder(tmp_path: Path) -> None:
    service = SystemdUserService(tmp_path / "systemd" / "user")
    assert service.unit_path("w1") == tmp_path / "systemd" / "user" / "nodeau-endpoint-w1.service"
    assert service.describe() == (
        f"systemd --user units {tmp_path}/systemd/user/nodeau-endpoint-NAME.service"
    )


# -- launchd


def test_the_launchd_agent_runs_the_endpoint_and_keeps_it_alive(tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    assert plistlib.loads(launchd_plist(spec)) == {
        "Label": "nodeau.endpoint.qwen-chat",
        "ProgramArguments": list(spec.command),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
        "StandardOutPath": str(spec.log_path),
        "StandardErrorPath": str(spec.log_path),
        "ExitTimeOut": 10,
        "Umask": 0o077,  # what it creates is the user's alone (docs/adr/0021-private-home.md)
    }


def test_the_launchd_manager_names_its_agents_in_its_folder(tmp_path: Path) -> None:
    agents = LaunchdAgent(tmp_path / "LaunchAgents", "gui/501")
    assert agents.plist_path("w1") == tmp_path / "LaunchAgents" / "nodeau.endpoint.w1.plist"
    assert launchd_label("w1") == "nodeau.endpoint.w1"
    assert agents.describe() == f"launchd agents {tmp_path}/LaunchAgents/nodeau.endpoint.NAME.plist"


# -- names and specs


@pytest.mark.parametrize("name", ["a", "qwen2.5-7b", "W_1", "9lives", "a" * 101])
def test_plain_names_name_a_service(name: str) -> None:
    assert check_name(name) == name
    assert unit_name(name) == f"nodeau-endpoint-{name}.service"


@pytest.mark.parametrize(
    "name", ["", "-x", ".hidden", "a b", "a/b", "a\\b", "ü", "a:b", "a\nb", "a" * 102]
)
def test_other_names_are_refused_not_escaped(name: str) -> None:
    with pytest.raises(ValueError, match="cannot name a user service"):
        check_name(name)
    with pytest.raises(ValueError, match="cannot name a user service"):
        unit_name(name)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"port": 0}, "0 is not a TCP port"),
        ({"port": 65536}, "65536 is not a TCP port"),
        ({"state_path": Path("state.sqlite3")}, "the state path must be absolute"),
        ({"log_path": Path("x.log")}, "the log path must be absolute"),
        ({"python": Path("python3")}, "the python path must be absolute"),
        ({"log_path": Path("/tmp/a\nb.log")}, "the log path has a control character"),
        ({"workload": "a b"}, "cannot name a user service"),
    ],
)
def test_a_spec_that_cannot_be_written_is_refused(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        spec_for(tmp_path, **changes)


# -- choosing a manager


@pytest.mark.parametrize(
    ("platform", "systemd", "launchd", "expected"),
    [
        ("linux", True, False, ("systemd", "systemctl --user reaches a user manager")),
        (
            "linux",
            False,
            True,
            ("background", "systemctl --user does not reach a user manager: no bus"),
        ),
        ("darwin", True, True, ("launchd", "launchd answers")),
        ("darwin", True, False, ("background", "launchctl does not answer: no domain")),
        (
            "freebsd",
            False,
            False,
            ("background", "systemctl --user does not reach a user manager: no bus"),
        ),
    ],
)
def test_the_manager_is_the_one_that_answers(
    platform: str, systemd: bool, launchd: bool, expected: tuple[str, str]
) -> None:
    picked = pick_service_manager(
        platform, Probe(works=systemd, detail="no bus"), Probe(works=launchd, detail="no domain")
    )
    assert picked == expected


def test_without_systemctl_the_fallback_is_chosen_and_says_why(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(tmp_path)}
    chosen = choose_service_manager(env, "linux", tmp_path / "run")
    assert isinstance(chosen, BackgroundProcess)
    assert chosen.describe() == (
        "a supervised background process (systemctl --user does not reach a user manager: "
        "no systemctl on PATH); it restarts a failed endpoint but does not survive a reboot"
    )


def test_on_this_machine_the_choice_follows_what_systemctl_says(tmp_path: Path) -> None:
    """Here (a container, usually) ``systemctl --user`` reaches no manager and the fallback
    says so; where it does, systemd is chosen with its units under XDG_CONFIG_HOME."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    probe = probe_systemd(env)
    chosen = choose_service_manager(env, "linux", tmp_path / "run")
    if probe.works:
        assert isinstance(chosen, SystemdUserService)
        assert chosen.unit_path("w") == tmp_path / "cfg/systemd/user/nodeau-endpoint-w.service"
    else:
        assert isinstance(chosen, BackgroundProcess)
        assert probe.detail
        assert f"does not reach a user manager: {probe.detail})" in chosen.describe()


# -- the fallback, before and after anything runs


def test_the_fallback_with_nothing_installed_runs_nothing(tmp_path: Path) -> None:
    service = BackgroundProcess(tmp_path / "run")
    assert not service.running("w1")
    service.stop("w1")  # nothing to stop is fine
    with pytest.raises(ServiceError, match=r"w1\.json: no installed endpoint"):
        service.start("w1")


def test_a_pid_file_naming_another_process_stops_nothing(tmp_path: Path) -> None:
    """A pid file left behind, its pids now someone else's (here: this test's own process),
    is not the endpoint: not running, and stopping it signals nobody."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "w1.pid").write_text(f'{{"supervisor": {os.getpid()}, "endpoint": {os.getpid()}}}')
    service = BackgroundProcess(run)
    assert not service.running("w1")
    service.stop("w1", grace_s=0.1)
    assert not (run / "w1.pid").exists()


def test_allowed_origins_become_the_endpoints_allow_origin_arguments(tmp_path: Path) -> None:
    plain = spec_for(tmp_path)
    allowed = spec_for(tmp_path, allowed_origins=("https://tools.example", "http://localhost:3000"))
    assert allowed.command == (
        *plain.command,
        "--allow-origin", "https://tools.example",
        "--allow-origin", "http://localhost:3000",
    )  # fmt: skip
