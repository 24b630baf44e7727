"""The Playground: talk to a running service through its own loopback endpoint.

Why it is so: docs/adr/decisions/apps-dashboard.md (playground.py).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from attrs import frozen

from nodeau.apps.planes.plane import Plane
from nodeau.ports.errors import NodeauError

MAX_TOKENS = 4096
MAX_TEMPERATURE = 2.0  # the OpenAI API's range, which llama-server takes as it is
MAX_ITEMS = 64
MAX_TEXT = 32_000
ROLES = ("system", "user", "assistant")
ROUTE_OF = {"chat": "/chat/completions", "embed": "/embeddings", "rerank": "/rerank"}


class PlaygroundError(NodeauError):
    """A Playground request that cannot be made: the page shows the line (400 or 409)."""

    status = 400


class NotServing(PlaygroundError):
    status = 409


@frozen(kw_only=True)
class Target:
    """The service a Playground request goes to, and what will answer it."""

    name: str
    task: str
    model: str
    artifact: str
    machine: str | None
    gpu: str | None
    state: str
    endpoint: str  # the OpenAI-compatible base URL, ".../v1"


def find_target(plane: Plane, name: str) -> Target:
    """The running service ``name`` as its view and its recorded admission say."""
    view = next((w for w in plane.serving.workloads() if w.name == name), None)
    if view is None:
        raise NotServing(f"no workload called {name!r} holds a card now (nodeau ps lists them)")
    if view.kind != "service":
        raise NotServing(f"{name} is a batch job; the Playground talks to services")
    if view.endpoint is None or view.state != "serving":
        raise NotServing(f"{name} is not serving now: {view.sentence}")
    record = plane.serving.admission(name).record
    return Target(
        name=name,
        task=record.config.task.value,
        model=view.model,
        artifact=record.workload.artifact_id,
        machine=view.machine,
        gpu=view.gpu,
        state=view.state,
        endpoint=view.endpoint,
    )


def _text(value: object, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or not (empty or value.strip()):
        raise PlaygroundError(f"{what} must be a {'' if empty else 'non-empty '}string")
    if len(value) > MAX_TEXT:
        raise PlaygroundError(f"{what} is longer than {MAX_TEXT} characters")
    return value


def _texts(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not value or len(value) > MAX_ITEMS:
        raise PlaygroundError(f"{what} must be a list of 1 to {MAX_ITEMS} strings")
    return [_text(v, f"each of {what}") for v in value]


def _fields(asked: object, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(asked, dict):
        raise PlaygroundError("send a JSON object")
    extra = sorted(set(asked) - allowed)
    if extra:
        raise PlaygroundError(f"unknown field {extra[0]!r}; send {', '.join(sorted(allowed))}")
    return asked


def chat_body(target: Target, asked: object) -> dict[str, Any]:
    """The chat completion request for ``asked`` (``messages``: the conversation so far and
    the new message; optional ``max_tokens`` and ``temperature``)."""
    fields = _fields(asked, {"messages", "max_tokens", "temperature"})
    messages = fields.get("messages")
    if not isinstance(messages, list) or not messages or len(messages) > MAX_ITEMS:
        raise PlaygroundError(f"messages must be a list of 1 to {MAX_ITEMS} messages")
    checked = []
    for m in messages:
        if not isinstance(m, dict) or set(m) != {"role", "content"} or m["role"] not in ROLES:
            raise PlaygroundError(
                'each message is {"role": system|user|assistant, "content": text}'
            )
        said = _text(m["content"], "a message", empty=m["role"] == "assistant")
        checked.append({"role": m["role"], "content": said})
    body: dict[str, Any] = {"model": target.name, "messages": checked, "stream": True}
    tokens = fields.get("max_tokens")
    if tokens is not None:
        if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= MAX_TOKENS:
            raise PlaygroundError(f"max_tokens must be a whole number from 1 to {MAX_TOKENS}")
        body["max_tokens"] = tokens
    temperature = fields.get("temperature")
    if temperature is not None:
        if (
            not isinstance(temperature, int | float)
            or isinstance(temperature, bool)
            or not 0 <= temperature <= MAX_TEMPERATURE
        ):
            raise PlaygroundError(f"temperature must be a number from 0 to {MAX_TEMPERATURE:g}")
        body["temperature"] = temperature
    return body


def embed_body(target: Target, asked: object) -> dict[str, Any]:
    """The embeddings request for ``asked`` (``input``: texts)."""
    fields = _fields(asked, {"input"})
    return {"model": target.name, "input": _texts(fields.get("input"), "input")}


def rerank_body(target: Target, asked: object) -> dict[str, Any]:
    """The rerank request for ``asked`` (``query``, ``documents``)."""
    fields = _fields(asked, {"query", "documents"})
    return {
        "model": target.name,
        "query": _text(fields.get("query"), "query"),
        "documents": _texts(fields.get("documents"), "documents"),
    }


BODIES = {"chat": chat_body, "embed": embed_body, "rerank": rerank_body}


def answered_by(target: Target) -> dict[str, Any]:
    return {
        "workload": target.name,
        "model": target.model,
        "artifact": target.artifact,
        "machine": target.machine,
        "gpu": target.gpu,
        "endpoint": target.endpoint,
    }


def snippets(target: Target, body: dict[str, Any]) -> dict[str, str]:
    """The same request as a ``curl`` command line and as Python with the ``openai`` client."""
    route = ROUTE_OF[target.task]
    url = target.endpoint + route
    sent = json.dumps(body, indent=2, ensure_ascii=False)
    curl = " \\\n  ".join(
        [
            "curl" + (" -N" if body.get("stream") else ""),
            shlex.quote(url),
            "-H 'Content-Type: application/json'",
            "-d " + shlex.quote(sent),
        ]
    )
    head = [
        "from openai import OpenAI",
        "",
        f'client = OpenAI(base_url="{target.endpoint}", api_key="unused")',
    ]
    args = {k: v for k, v in body.items() if k != "stream"}
    if target.task == "chat":
        call = [
            "stream = client.chat.completions.create(",
            *(line for k, v in args.items() for line in _argument(k, v)),
            "    stream=True,",
            ")",
            "for chunk in stream:",
            "    if chunk.choices:",
            '        print(chunk.choices[0].delta.content or "", end="", flush=True)',
        ]
    elif target.task == "embed":
        call = [
            "answer = client.embeddings.create(",
            *(f"    {k}={_py(v)}," for k, v in args.items()),
            ")",
            "print([len(item.embedding) for item in answer.data])",
        ]
    else:
        call = [
            "# the openai client has no rerank method: post to the route itself",
            "answer = client.post(",
            f'    "{route}",',
            f"    body={_py(args)},",
            "    cast_to=object,",
            ")",
            'print(answer["results"])',
        ]
    return {"curl": curl, "python": "\n".join([*head, "", *call])}


def _py(value: object) -> str:
    """A JSON value as a Python literal (JSON's true/false/null spelt as Python's)."""
    return repr(value)


def _argument(name: str, value: object) -> list[str]:
    """``name=value,`` in a call; a list of several (a conversation's turns) one per line."""
    if isinstance(value, list) and len(value) > 1:
        return [f"    {name}=[", *(f"        {_py(v)}," for v in value), "    ],"]
    return [f"    {name}={_py(value)},"]
