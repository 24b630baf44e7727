"""``nodeau run NAME`` on a workload that serves, with flags other than it runs with, is
refused in one line and changes nothing; flags left out mean "as it is".

Real parts only: the installed ``nodeau``, a real llama-server on a tiny GGUF model (a
simulated card) and the endpoint as a user service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

STOP_AND_RUN = (
    "a model server keeps what it was started with: stop it with nodeau stop tiny --workload "
    "and run it again with those (or give another --name)"
)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    yield c
    done = c("ps", "--json")
    if done.returncode == 0:
        for row in json.loads(done.stdout):
            c("stop", row["name"], "--workload")


def test_other_flags_are_refused_and_flags_left_out_keep_what_it_runs_with(
    cli: Cli, tmp_path: Path
) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=3)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    first = cli("run", "tiny", "--unproved", "--context", "100")
    assert first.returncode == 0, first.stderr
    before = cli.json("ps")
    context_of = cli("service", "explain", "tiny", "--json")

    refused = cli("run", "tiny", "--unproved", "--context", "2048")
    assert refused.returncode == 1
    assert refused.stderr == (
        "nodeau: tiny already serves with --context 100, not --context 2048 as asked, and "
        f"nothing was changed; {STOP_AND_RUN}\n"
    )
    for flags, said in (
        (("--task", "embed"), "with --task chat, not --task embed as asked"),
        (("--cpu",), "with no --cpu, not --cpu as asked"),
        (("--recovery", "automatic"), "with --recovery never, not --recovery automatic"),
        (("--allow-origin", "https://app.example"), "with no --allow-origin, not --allow-"),
    ):
        done = cli("run", "tiny", "--unproved", *flags)
        assert done.returncode == 1, flags
        assert done.stderr.startswith(f"nodeau: tiny already serves {said}"), done.stderr
        assert len(done.stderr.splitlines()) == 1
    after = cli.json("ps")
    assert isinstance(before, list) and isinstance(after, list)
    unchanged = ("name", "state", "since", "endpoint", "gpu", "on_cpu")
    assert [{k: r[k] for k in unchanged} for r in after] == [
        {k: r[k] for k in unchanged} for r in before
    ]
    assert cli("service", "explain", "tiny", "--json").stdout == context_of.stdout

    # left out, or the same: its endpoint is back, as it is
    for flags in ((), ("--context", "100", "--task", "chat", "--recovery", "never")):
        done = cli("run", "tiny", "--unproved", *flags)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("tiny is already serving; its endpoint is back at ")
