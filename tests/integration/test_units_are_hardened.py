"""The endpoint's and dashboard's systemd user units are sandboxed and still load.

``systemd-analyze --user security --offline=true`` must read an exposure below 7.0, with each
promised protection checked by name, and ``verify`` must load them. Why: docs/adr/0021.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeau.adapters.service_specs import (
    DashboardServiceSpec,
    EndpointServiceSpec,
    FleetSource,
    ServiceSpec,
)
from nodeau.adapters.user_service import systemd_unit, unit_name

# These units measure 6.5; unhardened they were 9.8 (9.6 read as system units).
EXPOSURE_BOUND = 7.0
PYTHON = Path(sys.executable)

NAMESPACES = ("user", "pid", "net", "uts", "mnt", "ipc", "cgroup")
DENIED_GROUPS = "clock cpu-emulation debug module mount obsolete privileged raw-io reboot swap"
# systemd-analyze's names for what the units promise (each must read "set")
PROMISED = (
    "NoNewPrivileges=",
    "LockPersonality=",
    "RestrictRealtime=",
    "RestrictSUIDSGID=",
    *(f"RestrictNamespaces=~{kind}" for kind in NAMESPACES),
    "RestrictAddressFamilies=~AF_PACKET",
    "RestrictAddressFamilies=~AF_NETLINK",
    "RestrictAddressFamilies=~…",  # every family but AF_UNIX, AF_INET and AF_INET6
    "SystemCallArchitectures=",
    *(f"SystemCallFilter=~@{group}" for group in DENIED_GROUPS.split()),
    "UMask=",
)
# what a CUDA model server started again by the endpoint needs (each must read "not set")
LEFT_FOR_CUDA = (
    "MemoryDenyWriteExecute=",  # the CUDA driver's and libffi's executable mappings
    "PrivateDevices=",  # /dev/nvidia*
    "DeviceAllow=",  # the same, as a device list
    "SystemCallFilter=~@resources",  # mbind, set_mempolicy, sched_setaffinity
    "RestrictAddressFamilies=~AF_UNIX",  # the CUDA MPS control socket
    "RestrictAddressFamilies=~AF_(INET|INET6)",  # the model server's loopback port
)


def systemd_analyze() -> str:
    """The ``systemd-analyze`` on PATH; its absence fails the test under CI=true (scripts/test
    installs Debian's systemd there) and skips it elsewhere, never passing it."""
    found = shutil.which("systemd-analyze")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("systemd-analyze is missing: apt-get install systemd (scripts/test does)")
    pytest.skip("no systemd-analyze on this machine: the units cannot be analysed here")


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A short XDG_RUNTIME_DIR: ``--user`` needs one, and socket paths under it must fit in
    108 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="nodeau-rt-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def specs(tmp_path: Path) -> dict[str, ServiceSpec]:
    home = tmp_path / "nodeau"
    endpoint = EndpointServiceSpec(
        workload="qwen-chat",
        port=18123,
        state_path=home / "state.sqlite3",
        log_path=home / "logs" / "endpoint-qwen-chat.log",
        python=PYTHON,
    )
    fleet = EndpointServiceSpec(
        workload="qwen-chat",
        port=18124,
        state_path=home / "state.sqlite3",
        log_path=home / "logs" / "endpoint-fleet.qwen-chat.log",
        python=PYTHON,
        fleet=FleetSource(kubeconfig=tmp_path / "kubeconfig", context="prod"),
    )
    dashboard = DashboardServiceSpec(
        port=18125, home=home, log_path=home / "logs" / "dashboard.log", python=PYTHON
    )
    return {"endpoint": endpoint, "fleet-endpoint": fleet, "dashboard": dashboard}


def write_unit(tmp_path: Path, spec: ServiceSpec) -> Path:
    unit = tmp_path / "units" / unit_name(spec.service)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(systemd_unit(spec))
    return unit


def analyze(runtime: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [systemd_analyze(), "--user", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        check=False,
    )


def exposure(runtime: Path, unit: Path) -> float:
    """The overall exposure ``systemd-analyze security`` prints for ``unit``."""
    done = analyze(runtime, "security", "--offline=true", "--no-pager", str(unit))
    assert done.returncode == 0, done.stderr
    found = re.search(
        rf"Overall exposure level for {re.escape(unit.name)}: (\d+\.\d+)", done.stdout
    )
    assert found, done.stdout
    return float(found.group(1))


def checks(runtime: Path, unit: Path) -> dict[str, bool | None]:
    """Each of ``systemd-analyze security``'s checks by name: set, not set, or not applying."""
    done = analyze(runtime, "security", "--offline=true", "--json=short", str(unit))
    assert done.returncode == 0, done.stderr
    return {check["name"]: check["set"] for check in json.loads(done.stdout)}


@pytest.mark.parametrize("which", ["endpoint", "fleet-endpoint", "dashboard"])
def test_each_unit_is_exposed_below_the_bound_and_keeps_every_protection_it_promises(
    tmp_path: Path, runtime_dir: Path, which: str
) -> None:
    unit = write_unit(tmp_path, specs(tmp_path)[which])
    assert exposure(runtime_dir, unit) < EXPOSURE_BOUND
    found = checks(runtime_dir, unit)
    assert {name: found.get(name) for name in PROMISED} == dict.fromkeys(PROMISED, True)


@pytest.mark.parametrize("which", ["endpoint", "fleet-endpoint", "dashboard"])
def test_no_unit_takes_from_a_cuda_model_server_what_it_needs(
    tmp_path: Path, runtime_dir: Path, which: str
) -> None:
    unit = write_unit(tmp_path, specs(tmp_path)[which])
    found = checks(runtime_dir, unit)
    assert {name: found.get(name) for name in LEFT_FOR_CUDA} == dict.fromkeys(LEFT_FOR_CUDA, False)


@pytest.mark.parametrize("which", ["endpoint", "fleet-endpoint", "dashboard"])
def test_each_hardened_unit_still_loads(tmp_path: Path, runtime_dir: Path, which: str) -> None:
    """``verify`` loads the unit as the user manager would; systemd also loads the machine's
    own user units and may complain about those: only lines naming ours count."""
    unit = write_unit(tmp_path, specs(tmp_path)[which])
    done = analyze(runtime_dir, "verify", str(unit))
    ours = [line for line in done.stderr.splitlines() if unit.name in line or str(unit) in line]
    assert (done.returncode, ours) == (0, [])
