"""The organisation's policy on one machine, through the installed command.

Each refusal kind (permission, limit, quota) as ``run`` and ``plan explain`` say it, and
``nodeau organisation`` showing spending. On the Home plan the install is refused, so the policy
is written to ``$NODEAU_HOME/organisation.json`` (in process: tests/integration).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="2 x 24 GiB")
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, quant="q8_0")
    imported = c("models", "import", str(path), "--alias", "tiny")
    assert imported.returncode == 0, imported.stderr
    yield c
    for row in json.loads(c("ps", "--json").stdout or "[]"):
        c("stop", row["name"], "--workload")


def policy(cli: Cli, document: dict[str, object]) -> None:
    """Put ``document`` where one machine keeps its policy."""
    home = Path(cli.env["NODEAU_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "organisation.json").write_text(json.dumps(document))


def refused_line(cli: Cli, *args: str) -> str:
    done = cli(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    line: str = done.stderr.strip().splitlines()[-1]
    return line


def explained(cli: Cli, *args: str) -> str:
    """The refusal ``nodeau plan explain`` says ``nodeau run`` would print (its last line)."""
    done = cli("plan", "explain", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    line: str = done.stdout.strip().splitlines()[-1]
    return line


def test_without_a_policy_everybody_is_an_admin_and_install_needs_a_plan_with_it(
    cli: Cli, tmp_path: Path
) -> None:
    shown = cli.json("organisation")
    assert isinstance(shown, dict)
    assert (shown["configured"], shown["role"], shown["user"]) == (False, "admin", USER)
    assert GROUP in shown["groups"]

    document = tmp_path / "policy.json"
    document.write_text(json.dumps({"everyone": "operator"}))
    line = refused_line(cli, "organisation", "install", str(document))
    assert line == (
        "refused (limit): limit.feature-not-in-plan: The Home plan does not include "
        "organisation-limits; the Team plan does."
    )
    assert not (Path(cli.env["NODEAU_HOME"]) / "organisation.json").exists()

    bad = tmp_path / "bad.json"
    bad.write_text('{"roles": {"admin": ["alice", 7]}}')
    policy(cli, {})
    (Path(cli.env["NODEAU_HOME"]) / "organisation.json").write_bytes(bad.read_bytes())
    done = cli("run", "tiny", "--unproved")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"nodeau: {Path(cli.env['NODEAU_HOME']) / 'organisation.json'}: roles.admin[1]: "
        "expected a string, got a number"
    )
    assert json.loads(cli("ps", "--json").stdout) == []


def test_a_viewer_may_not_run_stop_or_drain(cli: Cli) -> None:
    policy(cli, {"roles": {"admin": ["group:nodeau-admins"]}, "contact": "#gpu-help"})
    want = (
        f"refused (permission): permission.role-may-not: {USER} has the viewer role, which "
        "may not run; only operators and admins (group:nodeau-admins) can, by the "
        "organisation's policy; ask #gpu-help."
    )
    assert refused_line(cli, "run", "tiny", "--unproved") == want
    assert explained(cli, "tiny", "--unproved") == want
    assert json.loads(cli("ps", "--json").stdout) == []
    drain = refused_line(cli, "scheduling", "drain", "--node", "testbox")
    assert drain.startswith(
        f"refused (permission): permission.role-may-not: {USER} has the viewer role, which "
        "may not drain; only admins (group:nodeau-admins) can"
    )
    shown = cli.json("organisation")
    assert isinstance(shown, dict)
    assert (shown["role"], shown["contact"]) == ("viewer", "#gpu-help")


def test_limits_refuse_the_shape_of_a_request(cli: Cli) -> None:
    policy(cli, {"everyone": "operator", "limits": {"max_context_tokens": 256}})
    want = (
        "refused (limit): limit.context-over-limit: The request asks for a context of 512 "
        "tokens and the organisation's limit is 256."
    )
    assert refused_line(cli, "run", "tiny", "--unproved", "--context", "512") == want
    assert explained(cli, "tiny", "--unproved", "--context", "512") == want

    policy(cli, {"everyone": "operator", "limits": {"allowed_machines": ["elsewhere"]}})
    line = refused_line(cli, "run", "tiny", "--unproved", "--context", "256")
    assert line == (
        "refused (limit): limit.machine-not-allowed: every card that can take tiny is on a "
        "machine outside the organisation's limits (testbox); an admin can add it to the "
        "limits' allowed machines"
    )

    policy(cli, {"everyone": "operator", "limits": {"allowed_models": ["another"]}})
    line = refused_line(cli, "run", "tiny", "--unproved", "--context", "256")
    assert line.startswith(
        "refused (permission): permission.model-not-permitted: The organisation does not "
        "permit model tiny (artifact "
    )
    assert json.loads(cli("ps", "--json").stdout) == []


def test_a_quota_refuses_once_spent_and_names_whose_it_was(cli: Cli) -> None:
    policy(
        cli,
        {
            "everyone": "operator",
            "quotas": {"teams": {GROUP: {"max_workloads": 1}}},
            "contact": "the platform team",
        },
    )
    first = cli("run", "tiny", "--unproved", "--context", "256", "--name", "first")
    assert first.returncode == 0, first.stderr
    want = (
        f"refused (quota): quota.workloads-exhausted: Team {GROUP} runs 1 of its 1 workloads; "
        "stopping a workload frees quota; ask the platform team."
    )
    second = ("tiny", "--unproved", "--context", "256", "--name", "second")
    assert refused_line(cli, "run", *second) == want
    assert explained(cli, *second) == want
    shown = cli.json("organisation")
    assert isinstance(shown, dict)
    [quota] = shown["quotas"]
    assert (quota["subject"], quota["workloads"], quota["max_workloads"]) == (
        f"team {GROUP}",
        1,
        1,
    )
    assert [r["name"] for r in json.loads(cli("ps", "--json").stdout)] == ["first"]

    assert cli("stop", "first", "--workload").returncode == 0
    again = cli("run", *second)
    assert again.returncode == 0, again.stderr
