"""``GET /metrics`` on a workload's endpoint counts what it served, in Prometheus' format.

The ``openai`` client asks a plain, a streamed and a wrong-model completion of a real
llama-server; the counters, read with ``prometheus_client``'s parser, match each ``usage``.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

ROUTE = "/v1/chat/completions"
ASK = [{"role": "user", "content": "hi"}]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_endpoint_counts_requests_durations_and_reported_tokens(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=8)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    assert cli("run", "tiny", "--unproved", "--context", "256").returncode == 0
    try:
        [row] = json.loads(cli("ps", "--json").stdout)
        client = openai.OpenAI(base_url=row["endpoint"], api_key="x", max_retries=0)
        plain = client.chat.completions.create(model="tiny", messages=ASK, max_tokens=3)
        chunks = list(
            client.chat.completions.create(
                model="tiny",
                messages=ASK,
                max_tokens=3,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-4o", messages=ASK)
        text = httpx.get(row["endpoint"].removesuffix("/v1") + "/metrics", timeout=10).text
    finally:
        assert cli("stop", "tiny", "--workload").returncode == 0
    streamed = next(c.usage for c in reversed(chunks) if c.usage is not None)
    assert plain.usage is not None
    found = samples(text)
    labels = (("code", "200"), ("route", ROUTE), ("workload", "tiny"))
    assert found[("nodeau_requests_total", labels)] == 2
    refused = (("code", "404"), ("route", ROUTE), ("workload", "tiny"))
    assert found[("nodeau_requests_total", refused)] == 1
    timed = (("route", ROUTE), ("workload", "tiny"))
    assert found[("nodeau_request_duration_seconds_count", timed)] == 3
    assert found[("nodeau_request_duration_seconds_sum", timed)] > 0
    tokens = {
        kind: found[("nodeau_tokens_total", (("kind", kind), ("workload", "tiny")))]
        for kind in ("prompt", "completion")
    }
    assert tokens == {
        "prompt": plain.usage.prompt_tokens + streamed.prompt_tokens,
        "completion": plain.usage.completion_tokens + streamed.completion_tokens,
    }
