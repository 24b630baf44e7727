"""A workload's model server answers only the endpoint: its own port refuses everyone else.

A process or page that finds the real llama-server's port gets 401 and no CORS grant; the
endpoint, holding the key from the record, is answered.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai

from nodeau.adapters.sqlite_state import SqliteStateStore
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

NOW = datetime(2026, 12, 2, tzinfo=UTC)
PAGE = "http://evil.example"


def test_the_model_servers_port_refuses_all_but_the_endpoint(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=4)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    started = cli("run", "tiny", "--unproved", "--context", "256")
    assert started.returncode == 0, started.stderr
    try:
        store = SqliteStateStore(tmp_path / "home" / "state.sqlite3", lambda: NOW)
        server = store.snapshot().named("tiny").server  # type: ignore[union-attr]
        assert server is not None and server.api_key
        assert server.api_key not in " ".join(server.command), "never on its command line"
        assert server.api_key not in cli("ps", "--json").stdout, "never printed"

        chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=30) as direct:
            for method, path, body in (
                ("POST", "/v1/chat/completions", chat),
                ("POST", "/completion", {"prompt": "hi", "n_predict": 2}),
                ("GET", "/props", None),
                ("GET", "/slots", None),
                ("GET", "/v1/models", None),
            ):
                answer = direct.request(method, path, json=body, headers={"Origin": PAGE})
                assert answer.status_code == 401, (path, answer.status_code, answer.text)
                assert answer.headers.get("access-control-allow-origin") != PAGE
            preflight = direct.options(
                "/v1/chat/completions",
                headers={"Origin": PAGE, "Access-Control-Request-Method": "POST"},
            )
            assert preflight.headers.get("access-control-allow-origin") != PAGE
            assert preflight.headers.get("access-control-allow-credentials") != "true"
            wrong = direct.get("/props", headers={"Authorization": "Bearer guessed"})
            assert wrong.status_code == 401

        [row] = json.loads(cli("ps", "--json").stdout)
        client = openai.OpenAI(base_url=row["endpoint"], api_key="anything", max_retries=0)
        reply = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert reply.choices[0].message.content is not None, "the endpoint is answered"
    finally:
        assert cli("stop", "tiny", "--workload").returncode == 0
