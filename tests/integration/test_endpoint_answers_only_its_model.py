"""A request naming another model than the one served is a 404 ``model_not_found``.

Under real uvicorn with the ``openai`` client: the workload's name, its model's names and its
artifact id (or a prefix) are answered; anything else is refused and never reaches the server.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from nodeau.apps.endpoint.app import Upstream
from nodeau.domain.tasks import Task
from tests.support.real.endpoint import BOUND_S, Target, openai_client, running_endpoint
from tests.support.real.upstream import MinimalUpstream, running_upstream

WORKLOAD = "chatbot"
ARTIFACT = "5f2c" + "0123456789abcdef" * 3 + "a1b2c3d4e5f60718"[:12]
NAMES = ("tiny", "catalog/tiny-q8")


@pytest.fixture
def upstream() -> MinimalUpstream:
    return MinimalUpstream(model=WORKLOAD, chunk_delay_s=0.02)


@pytest.fixture
def named(upstream: MinimalUpstream) -> Iterator[str]:
    """An endpoint for workload ``chatbot`` serving the artifact called ``NAMES``."""
    with running_upstream(upstream) as base:
        served = Upstream(
            base_url=base, task=Task.CHAT, model_name=WORKLOAD, names=NAMES, artifact_id=ARTIFACT
        )
        with running_endpoint(Target(served)) as url:
            yield url


def test_the_artifact_id_is_64_hex_digits() -> None:
    assert len(ARTIFACT) == 64 and int(ARTIFACT, 16) >= 0


@pytest.mark.parametrize("model", ["gpt-4o", "tinyx", "TINY", "5f2c0", ARTIFACT[1:13], "chat"])
def test_another_model_is_a_404_model_not_found_and_never_reaches_the_model_server(
    named: str, upstream: MinimalUpstream, model: str
) -> None:
    with openai_client(named) as client, pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert refused.value.code == "model_not_found"
    assert refused.value.param == "model"
    message = refused.value.body["message"]  # type: ignore[index]
    assert message.startswith(f"the model {model!r} is not served here: this endpoint serves")
    assert "'chatbot' (it also answers to 'tiny', 'catalog/tiny-q8' and its artifact id" in message
    assert upstream.seen == [], "a request for another model never reaches the model server"


@pytest.mark.parametrize(
    "model",
    [
        WORKLOAD,
        *NAMES,
        ARTIFACT,
        ARTIFACT.upper(),
        f"sha256:{ARTIFACT}",
        ARTIFACT[:6],
        ARTIFACT[:12],
    ],
)
def test_the_workload_its_names_and_its_artifact_id_are_answered(
    named: str, upstream: MinimalUpstream, model: str
) -> None:
    with openai_client(named) as client:
        answer = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
    assert answer.choices[0].message.content
    assert upstream.seen[-1].path == "/v1/chat/completions"


def test_a_request_without_a_model_is_answered(named: str, upstream: MinimalUpstream) -> None:
    answer = httpx.post(
        f"{named}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        timeout=BOUND_S,
    )
    assert answer.status_code == 200, answer.text
    assert len(upstream.seen) == 1


@pytest.mark.parametrize("model", [7, None, ["chatbot"], {"id": "chatbot"}])
def test_a_model_that_is_not_text_is_a_400(
    named: str, upstream: MinimalUpstream, model: object
) -> None:
    body: dict[str, object] = {"messages": [{"role": "user", "content": "hi"}], "model": model}
    answer = httpx.post(f"{named}/v1/chat/completions", json=body, timeout=BOUND_S)
    if model is None:  # JSON null: no model asked for
        assert answer.status_code == 200, answer.text
        return
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "model"
    assert upstream.seen == []


def test_every_route_of_the_task_checks_the_model(named: str, upstream: MinimalUpstream) -> None:
    with openai_client(named) as client, pytest.raises(openai.NotFoundError) as refused:
        client.completions.create(model="gpt-3.5-turbo-instruct", prompt="once")
    assert refused.value.code == "model_not_found"
    with openai_client(named) as client:
        assert client.completions.create(model="tiny", prompt="once").choices
    assert [s.path for s in upstream.seen] == ["/v1/completions"]


def test_models_retrieve_answers_to_every_name_and_refuses_others(named: str) -> None:
    with openai_client(named) as client:
        found = {name: client.models.retrieve(name).id for name in (WORKLOAD, *NAMES)}
        by_id = client.models.retrieve(ARTIFACT[:12])
        with pytest.raises(openai.NotFoundError) as refused:
            client.models.retrieve("gpt-4o")
        listed = [m.id for m in client.models.list()]
    assert found == dict.fromkeys((WORKLOAD, *NAMES), WORKLOAD)
    assert by_id.id == WORKLOAD
    assert refused.value.code == "model_not_found"
    assert listed == [WORKLOAD], "the list names the model once, by its workload's name"
