"""The gateway's choice under real uvicorn, with the ``openai`` client, in front of two
minimal model servers: each request goes to the workload its ``model`` names; a name two
workloads share is a 400 naming both; a restarting workload is a 503 with Retry-After; a
route of another task is a 404; the Host rule still applies.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
import uvicorn

from nodeau.apps.endpoint.answers import Unavailable, Upstream
from nodeau.apps.endpoint.app import proxy_app
from nodeau.apps.endpoint.choice import EveryModel, Served
from nodeau.apps.endpoint.serve import endpoint_config
from nodeau.domain.tasks import Task
from tests.support.real.upstream import MinimalUpstream, bound_port, running_upstream, serving

BOUND_S = 15.0
ARTIFACT = "cd" * 32
RESTARTING = Unavailable(message="gamma is restarting", retry_after_s=7, model_server="restarting")


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, MinimalUpstream, MinimalUpstream]]:
    one, two = MinimalUpstream(model="alpha"), MinimalUpstream(model="beta")
    with running_upstream(one) as first, running_upstream(two) as second:
        served = Served(
            running=(
                Upstream(base_url=first, task=Task.CHAT, model_name="alpha", names=("tiny",)),
                Upstream(
                    base_url=second,
                    task=Task.EMBED,
                    model_name="beta",
                    names=("tiny", "minilm"),
                    artifact_id=ARTIFACT,
                ),
            ),
            waiting={"gamma": RESTARTING},
        )
        app = proxy_app(EveryModel(lambda: served))
        server = uvicorn.Server(endpoint_config(app, 0, log_level="warning"))
        with serving(server):
            yield f"http://127.0.0.1:{bound_port(server)}", one, two


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=BOUND_S)


def test_each_request_goes_to_the_workload_its_model_names(
    gateway: tuple[str, MinimalUpstream, MinimalUpstream],
) -> None:
    url, one, two = gateway
    before = (len(one.seen), len(two.seen))
    with client(url) as c:
        c.chat.completions.create(model="alpha", messages=[{"role": "user", "content": "hi"}])
        c.embeddings.create(model="minilm", input=["a"])
        c.embeddings.create(model=ARTIFACT[:8], input=["b"])
    assert (len(one.seen), len(two.seen)) == (before[0] + 1, before[1] + 2)
    assert one.seen[-1].path == "/v1/chat/completions"
    assert two.seen[-1].path == "/v1/embeddings"
    counted = httpx.get(f"{url}/metrics", timeout=BOUND_S).text
    assert 'nodeau_requests_total{code="200",route="/v1/embeddings",workload="beta"} 2.0' in counted
    assert 'route="/v1/chat/completions",workload="alpha"' in counted


def test_a_name_two_workloads_share_is_a_400_naming_both(
    gateway: tuple[str, MinimalUpstream, MinimalUpstream],
) -> None:
    with client(gateway[0]) as c, pytest.raises(openai.BadRequestError) as refused:
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    assert refused.value.code == "model_ambiguous"
    assert "(alpha, beta); name one of them as model" in str(refused.value)


def test_a_restarting_workload_is_a_503_with_retry_after(
    gateway: tuple[str, MinimalUpstream, MinimalUpstream],
) -> None:
    answer = httpx.post(
        f"{gateway[0]}/v1/chat/completions",
        json={"model": "gamma", "messages": [{"role": "user", "content": "hi"}]},
        timeout=BOUND_S,
    )
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "7"
    assert answer.json()["error"]["message"].startswith("gamma is restarting")


def test_a_route_of_another_task_is_a_404_naming_the_task(
    gateway: tuple[str, MinimalUpstream, MinimalUpstream],
) -> None:
    with client(gateway[0]) as c, pytest.raises(openai.NotFoundError) as refused:
        c.chat.completions.create(model="beta", messages=[{"role": "user", "content": "hi"}])
    assert "beta runs the embed task" in str(refused.value)


def test_the_list_and_health_name_every_model(
    gateway: tuple[str, MinimalUpstream, MinimalUpstream],
) -> None:
    with client(gateway[0]) as c:
        assert [m.id for m in c.models.list()] == ["alpha", "beta"]
    health = httpx.get(f"{gateway[0]}/health", timeout=BOUND_S).json()
    assert health == {"status": "ok", "models": ["alpha", "beta"], "waiting": ["gamma"]}


def test_the_host_rule_holds_at_the_gateway(
    gateway: tuple[str, MinimalUpstream, MinimalUpstream],
) -> None:
    port = gateway[0].rsplit(":", 1)[1]
    answer = httpx.get(
        f"{gateway[0]}/v1/models", headers={"Host": f"evil.example:{port}"}, timeout=BOUND_S
    )
    assert answer.status_code == 403
