"""Nodeau from its wheel alone: a new venv outside the repository, nothing else of the checkout.

With no llama-server on PATH: ``server install --cpu`` (reusing the cached build), ``models
import``, ``run``, and the ``openai`` client asking SmolLM2-135M-Instruct through the endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.real.real_models import SMOLLM2, fetch

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel built from this checkout installed, and nothing else of it."""
    work = tmp_path_factory.mktemp("wheel")
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    source = work / "source"
    for name in (f.decode() for f in files if f):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NODEAU_", "PYTHON"))}
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"),
         str(source)], cwd=work, env=env)  # fmt: skip
    [wheel] = (work / "dist").glob("nodeau-*.whl")
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=work, env=env)
    # the versions this checkout was tested with, from the package index (or pip's cache)
    frozen = run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], cwd=work, env=env)
    pins = work / "constraints.txt"
    pins.write_text("\n".join(line for line in frozen.splitlines() if "llama" not in line))
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(pins),
         str(wheel)], cwd=work, env=env)  # fmt: skip
    return venv


@pytest.fixture
def user(installed: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a user of that venv: its bin on PATH, no llama-server anywhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NODEAU_", "PYTHON"))}
    env.update(
        PATH=f"{installed / 'bin'}:/usr/bin:/bin",
        NODEAU_HOME=str(tmp_path / "home"),
        NODEAU_MACHINE="wheelbox",
        NODEAU_SIMULATED_GPUS="1 x 24 GiB",  # no NVIDIA card here: the model runs on the CPU
        NODEAU_DISK_RESERVE_BYTES="0",
    )
    yield env
    subprocess.run(
        [str(installed / "bin" / "nodeau"), "stop", "demo", "--workload"],
        cwd=tmp_path, env=env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_wheel_installs_a_server_imports_runs_and_answers(
    installed: Path, user: dict[str, str], tmp_path: Path
) -> None:
    nodeau = str(installed / "bin" / "nodeau")
    python = str(installed / "bin" / "python")
    where = run([python, "-c", "import nodeau.apps; print(nodeau.apps.__file__)"],
                cwd=tmp_path, env=user)  # fmt: skip
    assert Path(where.strip()).is_relative_to(installed)  # the package, not the checkout

    built = json.loads(
        run([nodeau, "server", "install", "--cpu", "--json"], cwd=tmp_path, env=user)
    )
    assert built["backends"] == [] and Path(built["binary"]).is_file()
    environment = run([nodeau, "environment"], cwd=tmp_path, env=user)
    assert f"{built['binary']}: the newest `nodeau server install` build (cpu)" in environment

    model = fetch(SMOLLM2)
    run([nodeau, "models", "import", str(model), "--alias", "demo"], cwd=tmp_path, env=user)
    started = run([nodeau, "run", "demo", "--unproved", "--context", "2048", "--json"],
                  cwd=tmp_path, env=user)  # fmt: skip
    endpoint = json.loads(started)["workload"]["endpoint"]
    client = openai.OpenAI(base_url=endpoint, api_key="local", timeout=120)
    reply = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "What is the capital of France? One sentence."}],
        max_tokens=32,
        temperature=0,
    )
    answer = reply.choices[0].message.content or ""
    assert "Paris" in answer, answer
    stopped = run([nodeau, "stop", "demo", "--workload"], cwd=tmp_path, env=user)
    assert stopped.startswith("demo: endpoint and model stopped; ") and "is free" in stopped
