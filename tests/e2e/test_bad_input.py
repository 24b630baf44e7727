"""Every command, given bad input, answers with one line and an exit code: never a traceback.

The installed ``nodeau`` runs on an empty home (the one-machine plane), then on a
fleet whose API server cannot be reached. Each row says what was wrong and the
start of what the person reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.real.cli import Cli

ROWS: list[tuple[tuple[str, ...], dict[str, str], int, str]] = [
    # (arguments, extra settings, exit code, start of stderr)
    (("run", "nope"), {}, 1, "nodeau: nope: no alias, catalog model or artifact id"),
    (("run", "nope", "--after", "0m"), {}, 1, "nodeau: --after '0m' is no time at all"),
    (("run", "nope", "--context", "-5"), {}, 1, "nodeau: --context must be a positive"),
    (("run", "nope", "--wait", "-1"), {}, 1, "nodeau: --wait must be zero or more"),
    (("stop", "nope"), {}, 1, "nodeau: no workload called 'nope'; nodeau ps lists them"),
    (("stop", "nope", "--workload"), {}, 1, "nodeau: no workload called 'nope'"),
    (("service", "explain", "nope"), {}, 1, "nodeau: no workload called 'nope'"),
    (("placement", "explain", "nope"), {}, 1, "nodeau: no workload called 'nope'"),
    (("model", "verify", "nope"), {}, 1, "nodeau: nope: no alias, catalog model"),
    (("model", "info", "nope"), {}, 1, "nodeau: nope: no alias, catalog model"),
    (("models", "pull", "nope"), {}, 1, "nodeau: "),
    (("models", "import", "/nonexistent/x.gguf"), {}, 1, "nodeau: "),
    (("batch", "submit", "/nonexistent.jsonl", "--model", "x"), {}, 1, "nodeau: /nonexistent"),
    (("batch", "status", "nope"), {}, 1, "nodeau: no batch job called 'nope'"),
    (("batch", "results", "nope"), {}, 1, "nodeau: no batch job called 'nope'"),
    (("batch", "stop", "nope"), {}, 1, "nodeau: no batch job called 'nope'"),
    (("scheduling", "drain", "--node", "garage"), {}, 1, "nodeau: no machine called 'garage'"),
    (("scheduling", "undrain", "--node", "garage"), {}, 1, "nodeau: no machine called"),
    (("scheduling", "policy", "pack", "--node", "garage"), {}, 1, "nodeau: no machine called"),
    (("fleet", "list"), {"NODEAU_SIMULATED_GPUS": "lots"}, 1, "nodeau: NODEAU_SIMULATED_GPUS"),
    (("environment",), {"NODEAU_SIMULATED_GPUS": "0 x 0 GiB"}, 1, "nodeau: NODEAU_SIMULATED_GPUS"),
    (("ps",), {"NODEAU_PLANE": "moon"}, 1, "nodeau: NODEAU_PLANE must be one of"),
    (("ps",), {"NODEAU_DISK_RESERVE_BYTES": "2G"}, 1, "nodeau: NODEAU_DISK_RESERVE_BYTES must"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "settings", "code", "says"), ROWS, ids=[" ".join(r[0]) for r in ROWS]
)
def test_bad_input_is_one_line_never_a_traceback(
    tmp_path: Path, args: tuple[str, ...], settings: dict[str, str], code: int, says: str
) -> None:
    cli = Cli(tmp_path / "home", **{"NODEAU_SIMULATED_GPUS": "1 x 24 GiB", **settings})
    done = cli(*args)
    assert "Traceback" not in done.stderr
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith(says), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_batch_file_with_no_line_that_can_run_admits_nothing(tmp_path: Path) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text("not json\n{}\n", encoding="utf-8")
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    done = cli("batch", "submit", str(file), "--model", "x")
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == f"nodeau: {file}: no line can run; nothing was admitted"
    assert not (tmp_path / "home" / "state.sqlite3").exists()


UNREACHABLE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster: {server: "https://127.0.0.1:9"}
users:
- name: someone
  user: {token: "abc"}
contexts:
- name: gone
  context: {cluster: gone, user: someone}
current-context: gone
"""

FLEET_ROWS: list[tuple[str, ...]] = [
    ("ps",),
    ("ps", "--json"),
    ("run", "tiny", "--wait", "0"),
    ("stop", "tiny"),
    ("fleet", "list"),
    ("service", "explain", "tiny"),
    ("scheduling", "drain", "--node", "garage"),
    ("batch", "status"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args", FLEET_ROWS, ids=[" ".join(r) for r in FLEET_ROWS])
def test_a_fleet_that_cannot_be_reached_is_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(UNREACHABLE_KUBECONFIG, encoding="utf-8")
    cli = Cli(tmp_path / "home", NODEAU_PLANE="kubernetes", KUBECONFIG=str(config))
    cli.timeout_s = 60
    done = cli(*args)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("nodeau: cannot "), done.stderr
    assert "the cluster does not answer (" in last, done.stderr
