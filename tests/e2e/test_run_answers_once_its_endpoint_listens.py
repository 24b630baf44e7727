"""``nodeau run`` answers only once the endpoint it names accepts connections.

The real ``nodeau``, llama-server and endpoint (a user service) on a tiny GGUF model and a
simulated card. The address ``run`` prints is asked once, with no retry, the moment
``run`` returns: the first time, and when a second ``run`` brings a stopped endpoint back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    yield c
    done = c("ps", "--json")
    if done.returncode == 0:
        for row in json.loads(done.stdout):
            c("stop", row["name"], "--workload")


def answers_at_once(url: str) -> int:
    """The status of one GET of the endpoint's /health: no retry, no wait."""
    transport = httpx.HTTPTransport(retries=0)
    with httpx.Client(transport=transport, timeout=10.0, trust_env=False) as client:
        return client.get(url.removesuffix("/v1") + "/health").status_code


def test_run_and_run_again_answer_once_the_endpoint_listens(cli: Cli, tmp_path: Path) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=3)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0

    first = cli("run", "tiny", "--unproved", "--context", "256")
    assert first.returncode == 0, first.stderr
    [url] = re.findall(r"serving at (http://127\.0\.0\.1:\d+/v1)", first.stdout)
    assert answers_at_once(url) == 200

    assert cli("stop", "tiny").returncode == 0
    with pytest.raises(httpx.ConnectError):
        answers_at_once(url)

    again = cli("run", "tiny", "--unproved")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"tiny is already serving; its endpoint is back at {url}"
    assert answers_at_once(url) == 200
