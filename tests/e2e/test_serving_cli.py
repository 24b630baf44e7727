"""One machine end to end: import a tiny model, run it, call it with the openai client, stop it.

Real parts only: the installed ``nodeau`` command, a real llama-server on a
tiny GGUF model, the loopback endpoint, and the official ``openai`` client.
The cards are simulated ("1 x 24 GiB"), so the model runs on the CPU.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
from gguf import GGUFValueType, Keys

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.ports.state import WorkloadRecord
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli as BaseCli

DEADLINE_S = 120.0


class Cli(BaseCli):
    def __init__(self, home: Path, simulated: str = "1 x 24 GiB") -> None:
        super().__init__(home, NODEAU_SIMULATED_GPUS=simulated)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home")
    yield c
    # leave no model server or endpoint behind, whatever the test did
    done = c("ps", "--json")
    if done.returncode == 0:
        for row in json.loads(done.stdout):
            c("stop", row["name"], "--workload")


def endpoint_of(cli: Cli, name: str) -> str:
    rows = json.loads(cli("ps", "--json").stdout)
    [row] = [r for r in rows if r["name"] == name]
    endpoint: str = row["endpoint"]
    return endpoint


def test_run_serve_explain_and_stop(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0

    done = cli("run", "tiny", "--unproved", "--context", "512")
    assert done.returncode == 0, done.stderr
    assert "SIMULATED" in done.stdout
    assert "(estimated)" in done.stdout
    base = endpoint_of(cli, "tiny")

    client = openai.OpenAI(base_url=base, api_key="unused", timeout=60)
    assert [m.id for m in client.models.list()] == ["tiny"]
    answer = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=8
    )
    assert answer.choices[0].message.content is not None
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=8,
            stream=True,
        )
    )
    assert len(chunks) >= 2

    ps = cli("ps")
    assert "tiny" in ps.stdout and "serving" in ps.stdout and " SIM-GPU-" in ps.stdout
    explain = cli("service", "explain", "tiny")
    assert explain.returncode == 0, explain.stderr
    for term in ("weights", "kv cache", "compute buffer", "margin", "estimated", "SIMULATED"):
        assert term in explain.stdout
    # llama.cpp's own estimate, beside ours and labelled as the runtime's
    [second] = [line for line in explain.stdout.splitlines() if "runtime's own estimate" in line]
    assert second.startswith(
        "runtime's own estimate: "
    ) and " of host memory (llama-fit-params" in (second), second
    placement = cli("placement", "explain", "tiny")
    assert "why: pack" in placement.stdout

    # stopping the endpoint leaves the model loaded; running again only brings the endpoint back
    assert cli("stop", "tiny").returncode == 0
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=base, api_key="unused", timeout=5, max_retries=0).models.list()
    again = cli("run", "tiny", "--unproved")
    assert again.returncode == 0, again.stderr
    assert "already serving" in again.stdout
    assert endpoint_of(cli, "tiny") == base  # the same address across restarts
    assert [m.id for m in client.models.list()] == ["tiny"]

    stopped = cli("stop", "tiny", "--workload")
    assert stopped.returncode == 0, stopped.stderr
    assert "is free" in stopped.stdout
    assert json.loads(cli("ps", "--json").stdout) == []


def test_a_refusal_says_its_kind_and_creates_nothing(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", simulated="1 x 1 GiB")
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=4)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    # 128k tokens of context: the attention scratch alone is over a GiB (estimated)
    done = cli("run", "tiny", "--unproved", "--context", "131072")
    assert done.returncode == 2
    assert done.stderr.startswith("refused (capacity): capacity.no-card-large-enough: ")
    assert json.loads(cli("ps", "--json").stdout) == []


def test_environment_and_fleet_say_simulated(cli: Cli) -> None:
    env = cli("environment")
    assert env.returncode == 0
    assert "SIMULATED" in env.stdout and "Simulated GPU (24 GiB)" in env.stdout
    fleet = cli("fleet", "list")
    assert "testbox" in fleet.stdout and "one machine" in fleet.stdout


def test_an_embed_workload_answers_embeddings_and_only_them(cli: Cli, tmp_path: Path) -> None:
    # the model declares its pooling (mean), as converted embedding models do
    pooling = {Keys.LLM.POOLING_TYPE.format(arch="llama"): (1, GGUFValueType.UINT32)}
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, override_keys=pooling)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    done = cli(
        "run", "tiny", "--unproved", "--name", "vectors", "--task", "embed", "--context", "256"
    )
    assert done.returncode == 0, done.stderr
    client = openai.OpenAI(base_url=endpoint_of(cli, "vectors"), api_key="unused", timeout=60)
    result = client.embeddings.create(model="vectors", input=["hello there", "general kenobi"])
    assert len(result.data) == 2
    assert len(result.data[0].embedding) == 64  # the tiny model's embedding width
    assert result.data[0].embedding != result.data[1].embedding
    # the routes are the task's: a chat call to an embed workload is a clear 404
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="vectors", messages=[{"role": "user", "content": "x"}])
    assert "embed" in str(refused.value)


# -- supervision: the model server killed under a serving endpoint


def hms(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M:%S")


def recorded(home: Path, name: str) -> WorkloadRecord:
    """The workload's record in the plane's state (where its model server's pid is kept)."""
    found = SqliteStateStore(home / "state.sqlite3", lambda: datetime.now(UTC)).snapshot()
    record = found.named(name)
    assert record is not None
    return record


def ps_row(cli: Cli, name: str) -> dict[str, Any]:
    [row] = [r for r in json.loads(cli("ps", "--json").stdout) if r["name"] == name]
    return dict(row)


def wait_for_row(cli: Cli, name: str, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        row = ps_row(cli, name)
        if ready(row):
            return row
        assert time.monotonic() < deadline, f"{name} never got there: {row}"
        time.sleep(0.1)


def matches(pattern: str, text: str) -> bool:
    """``text`` is ``pattern`` written out, where ``{age}`` stands for any ``ps`` age."""
    parts = [re.escape(p) for p in pattern.split("{age}")]
    return re.fullmatch(r"\d+[smhd]".join(parts), text) is not None


@pytest.mark.slow
def test_a_killed_model_server_is_restarted_and_clients_get_a_503_meanwhile(
    cli: Cli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    done = cli("run", "tiny", "--unproved", "--context", "256")
    assert done.returncode == 0, done.stderr
    base = endpoint_of(cli, "tiny")
    seen: list[int] = []
    hooks = {"response": [lambda response: seen.append(response.status_code)]}
    watched = openai.DefaultHttpxClient(event_hooks=hooks)
    client = openai.OpenAI(base_url=base, api_key="unused", timeout=60, http_client=watched)
    once = openai.OpenAI(base_url=base, api_key="unused", timeout=60, max_retries=0)
    with client, once:
        killed_and_restarted(cli, home, base, client, once, seen)


def killed_and_restarted(
    cli: Cli, home: Path, base: str, client: openai.OpenAI, once: openai.OpenAI, seen: list[int]
) -> None:
    ask = [{"role": "user", "content": "hello"}]
    assert client.chat.completions.create(model="tiny", messages=ask, max_tokens=4).choices
    first = recorded(home, "tiny").server
    assert first is not None

    os.killpg(first.pid, signal.SIGKILL)
    row = wait_for_row(cli, "tiny", lambda r: r["state"] == "restarting")
    record = recorded(home, "tiny")
    ended, attempt = record.workload.last_exit, record.workload.next_attempt
    assert ended is not None and attempt is not None
    assert attempt - ended.at == timedelta(seconds=10)  # the kubelet's first step
    assert matches(
        f"restarting on testbox (SIM-GPU-…) since {hms(ended.at)} ({{age}}): its model server was"
        f" killed by signal 9 (SIGKILL) at {hms(ended.at)}; restart 1, next attempt at"
        f" {hms(attempt)}",
        row["sentence"],
    ), row["sentence"]
    assert row["endpoint"] == base  # the same address throughout

    # meanwhile the endpoint answers 503, with when to come back, on every route
    with pytest.raises(openai.APIStatusError) as refused:
        once.chat.completions.create(model="tiny", messages=ask, max_tokens=4)
    assert refused.value.status_code == 503
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 11
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["type"] == "unavailable"
    assert refused.value.body["message"].startswith(
        f"tiny is restarting: its model server was killed by signal 9 (SIGKILL) at"
        f" {hms(ended.at)}; restart 1, next attempt at {hms(attempt)}; this endpoint answers"
        " again once it serves (retry after "
    )
    with pytest.raises(openai.APIStatusError) as listed:
        once.models.list()
    assert listed.value.status_code == 503

    # the official client, as it is, waits as told and gets its answer after the restart
    seen.clear()
    answer = client.chat.completions.create(model="tiny", messages=ask, max_tokens=4)
    assert answer.choices[0].message.content is not None
    assert seen[0] == 503 and seen[-1] == 200, seen

    row = wait_for_row(cli, "tiny", lambda r: r["state"] == "serving")
    again = recorded(home, "tiny")
    assert again.server is not None and again.server.pid != first.pid
    assert matches(
        f"serving on testbox (SIM-GPU-…) since {hms(again.workload.since)} ({{age}}), restarted"
        f" once after its model server was killed by signal 9 (SIGKILL) at {hms(ended.at)};"
        " nothing to do",
        row["sentence"],
    ), row["sentence"]
    assert [m.id for m in client.models.list()] == ["tiny"]

    logs = cli("logs", "tiny", "--lines", "400")
    assert logs.returncode == 0, logs.stderr
    assert sum(line.startswith("--- nodeau: ") for line in logs.stdout.splitlines()) == 2
    assert len(cli("logs", "tiny", "--lines", "3").stdout.splitlines()) == 3
    unknown = cli("logs", "nope")
    assert unknown.returncode == 1
    assert unknown.stderr == "nodeau: no workload called 'nope'; nodeau ps lists them\n"

    stopped = cli("stop", "tiny", "--workload")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(cli("ps", "--json").stdout) == []


@pytest.mark.slow
def test_a_model_server_killed_while_its_endpoint_is_stopped_is_shown_exited(
    cli: Cli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    assert cli("run", "tiny", "--unproved", "--context", "256").returncode == 0
    assert cli("stop", "tiny").returncode == 0  # the endpoint only: nothing supervises
    server = recorded(home, "tiny").server
    assert server is not None
    os.killpg(server.pid, signal.SIGKILL)
    row = wait_for_row(cli, "tiny", lambda r: r["state"] != "serving")
    said = json.loads((home / "logs" / "tiny.log.exit.json").read_text())
    at = datetime.fromtimestamp(said["at"], UTC)
    assert row["state"] == "exited"
    assert matches(
        f"exited on testbox (SIM-GPU-…) since {hms(at)} ({{age}}): its model server was killed"
        f" by signal 9 (SIGKILL) at {hms(at)}; its endpoint is stopped, so nothing restarts"
        " it; nodeau run tiny brings the endpoint back, which starts the model server again",
        row["sentence"],
    ), row["sentence"]
    assert row["endpoint"] is None  # stopped: its address refuses connections
    assert recorded(home, "tiny").workload.state.value == "serving"  # ps records nothing

    # running it again brings the endpoint back, which restarts it
    assert cli("run", "tiny", "--unproved").returncode == 0
    wait_for_row(cli, "tiny", lambda r: r["state"] == "serving")
    with openai.OpenAI(base_url=endpoint_of(cli, "tiny"), api_key="unused", timeout=60) as client:
        assert [m.id for m in client.models.list()] == ["tiny"]
