"""``nodeau run``'s endpoint answers its own model by every name, and no other model.

A real llama-server serves a tiny GGUF under workload ``chatbot``, imported as alias
``tiny``. Through the official ``openai`` client: ``gpt-4o`` is a 404 ``model_not_found``;
the workload's name, the alias and the artifact id (a prefix of it) are answered.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def test_the_endpoint_refuses_another_model_and_answers_each_of_its_names(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=5)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    started = cli("run", "tiny", "--name", "chatbot", "--unproved", "--context", "256")
    assert started.returncode == 0, started.stderr
    try:
        store = SqliteStateStore(tmp_path / "home" / "state.sqlite3", lambda: NOW)
        record = store.snapshot().named("chatbot")
        assert record is not None
        assert "tiny" in record.workload.names, "the alias is recorded at admission"
        [row] = json.loads(cli("ps", "--json").stdout)
        client = openai.OpenAI(base_url=row["endpoint"], api_key="anything", max_retries=0)
        ask = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.NotFoundError) as refused:
            client.chat.completions.create(model="gpt-4o", messages=ask, max_tokens=2)
        assert refused.value.code == "model_not_found"
        assert "'gpt-4o' is not served here: this endpoint serves 'chatbot'" in str(refused.value)
        for name in ("chatbot", "tiny", record.workload.artifact_id[:12]):
            reply = client.chat.completions.create(model=name, messages=ask, max_tokens=2)
            assert reply.choices[0].message.content is not None, name
    finally:
        assert cli("stop", "chatbot", "--workload").returncode == 0
