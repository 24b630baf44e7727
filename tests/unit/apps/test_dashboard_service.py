"""The dashboard as a user service: its unit and plist run ``python -m nodeau.apps.dashboard``
on its port, under a name no workload's endpoint can take; what it keeps of the environment."""

from __future__ import annotations

import plistlib
import sys
from pathlib import Path

import pytest

from nodeau.adapters.dashboard_service import carried
from nodeau.adapters.service_specs import DASHBOARD_SERVICE, DashboardServiceSpec
from nodeau.adapters.user_service import launchd_plist, systemd_unit, unit_name
from nodeau.domain.runs import name_problem
from tests.support.builders.unit_files import exec_start_argv, sections


def spec(tmp_path: Path) -> DashboardServiceSpec:
    return DashboardServiceSpec(
        port=18200, home=tmp_path / "home", log_path=tmp_path / "d.log", python=Path(sys.executable)
    )


def test_the_unit_runs_the_dashboard_on_its_port(tmp_path: Path) -> None:
    made = spec(tmp_path)
    unit = sections(systemd_unit(made))
    assert unit["Unit"]["Description"] == "Nodeau local dashboard on 127.0.0.1:18200"
    assert exec_start_argv(unit["Service"]["ExecStart"]) == [
        sys.executable, "-m", "nodeau.apps.dashboard", "--home", str(tmp_path / "home"),
        "--port", "18200",
    ]  # fmt: skip
    assert unit["Service"]["Restart"] == "on-failure"
    plist = plistlib.loads(launchd_plist(made))
    assert plist["Label"] == "nodeau.endpoint.nodeau_dashboard"
    assert plist["ProgramArguments"] == list(made.command)


def test_no_workload_can_be_named_like_the_dashboard_service() -> None:
    assert unit_name(DASHBOARD_SERVICE) == "nodeau-endpoint-nodeau_dashboard.service"
    assert name_problem(DASHBOARD_SERVICE) is not None  # "_": never a workload's name


@pytest.mark.parametrize("bad", [{"port": 0}, {"home": Path("relative")}])
def test_a_bad_spec_is_refused(tmp_path: Path, bad: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "port": 18200,
        "home": tmp_path,
        "log_path": tmp_path / "d.log",
        "python": Path(sys.executable),
        **bad,
    }
    with pytest.raises(ValueError):
        DashboardServiceSpec(**fields)  # type: ignore[arg-type]


def test_only_the_variables_that_choose_the_plane_are_kept() -> None:
    environ = {
        "NODEAU_HOME": "/h",
        "NODEAU_PLANE": "kubernetes",
        "KUBECONFIG": "/k",
        "XDG_DATA_HOME": "/x",
        "PATH": "/bin",
        "HOME": "/root",
        "OPENAI_API_KEY": "secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
    }
    assert carried(environ) == {
        "HOME": "/root",
        "KUBECONFIG": "/k",
        "NODEAU_HOME": "/h",
        "NODEAU_PLANE": "kubernetes",
        "PATH": "/bin",
        "XDG_DATA_HOME": "/x",
    }
