"""Stub model servers for the qualification probes: known-bad ones, and good ones.

A ``StubBackend`` answers llama-server's routes with plain ``chat``, ``embed`` and ``rerank``
functions; ``serving_backend`` runs one on 127.0.0.1. The good ones answer as a capable model
would; each of ``KNOWN_BAD`` is a good one with one thing wrong, as real servers go wrong.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import uvicorn
from attrs import evolve, frozen
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from nodeau.domain.probes.bank import ANSWERS, PARAPHRASES, WORDS
from nodeau.domain.probes.vision import COLOURS
from nodeau.domain.qualification import Capability
from tests.support.real.upstream import loopback_socket, serving, upstream_config

Message = dict[str, Any]
DIMENSION = 32


class StubError(Exception):
    """Answer the request with this HTTP status and an OpenAI-style error message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@frozen(kw_only=True)
class StubBackend:
    """A model server's behaviour, route by route; ``raw`` (when set) answers every route
    with that exact response instead (a body that is not JSON, say)."""

    chat: Callable[[Mapping[str, Any]], Message]
    embed: Callable[[list[str]], list[list[float]]]
    rerank: Callable[[str, list[str]], list[float]]
    raw: Callable[[], Response] | None = None

    def app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/v1/rerank", self._rerank, methods=["POST"]),
            Route("/health", lambda _: JSONResponse({"status": "ok"})),  # as llama-server's
        ]
        return Starlette(routes=routes)

    async def _answer(
        self, request: Request, reply: Callable[[dict[str, Any]], object]
    ) -> Response:
        if self.raw is not None:
            return self.raw()
        body = json.loads(await request.body())
        try:
            return JSONResponse(reply(body))
        except StubError as exc:
            error = {"code": exc.status, "message": exc.message, "type": "server_error"}
            return JSONResponse({"error": error}, status_code=exc.status)

    async def _chat(self, request: Request) -> Response:
        def reply(body: dict[str, Any]) -> object:
            message = {"role": "assistant", **self.chat(body)}
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return {"object": "chat.completion", "model": body["model"], "choices": [choice]}

        return await self._answer(request, reply)

    async def _embeddings(self, request: Request) -> Response:
        def reply(body: dict[str, Any]) -> object:
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [
                {"object": "embedding", "index": i, "embedding": v}
                for i, v in enumerate(self.embed(texts))
            ]
            return {"object": "list", "model": body["model"], "data": data}

        return await self._answer(request, reply)

    async def _rerank(self, request: Request) -> Response:
        def reply(body: dict[str, Any]) -> object:
            got = self.rerank(body["query"], body["documents"])
            results = [{"index": i, "relevance_score": s} for i, s in enumerate(got)]
            results.sort(key=lambda r: -r["relevance_score"])  # as llama-server sorts them
            return {"model": body["model"], "object": "list", "results": results}

        return await self._answer(request, reply)


@contextmanager
def serving_backend(backend: StubBackend) -> Iterator[str]:
    """Serve ``backend`` on a free 127.0.0.1 port; yields its base URL."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    with serving(uvicorn.Server(upstream_config(backend.app())), sock):
        yield f"http://127.0.0.1:{port}"


# --- reading a request, as a capable model would -------------------------------------------


def user_text(body: Mapping[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if isinstance(part, dict))


def image_of(body: Mapping[str, Any]) -> bytes | None:
    content = body["messages"][-1]["content"]
    for part in content if isinstance(content, list) else []:
        if part.get("type") == "image_url":
            url: str = part["image_url"]["url"]
            return base64.b64decode(url.split(",", 1)[1])
    return None


def first_pixel(png: bytes) -> tuple[int, int, int]:
    """The first pixel of an 8-bit RGB PNG (read the way any decoder does)."""
    at, data = 8, b""
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind = png[at + 4 : at + 8]
        if kind == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    pixels = zlib.decompress(data)
    return pixels[1], pixels[2], pixels[3]  # after the row's filter byte


def colour_name(rgb: tuple[int, int, int]) -> str:
    return min(
        COLOURS, key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOURS[name], rgb, strict=True))
    )


def typed(value: str, schema: Mapping[str, Any]) -> object:
    wanted = schema.get("type", "integer" if value.isdigit() else "string")
    return int(value) if wanted == "integer" else value


def values_from(text: str, properties: Mapping[str, Any]) -> dict[str, object]:
    """Each property's value as the text gives it ("key 42", '"key" set to "word"')."""
    found: dict[str, object] = {}
    for key, schema in properties.items():
        if "const" in schema:
            found[key] = schema["const"]
            continue
        match = re.search(rf'\b"?{re.escape(key)}"?(?: set to| =)? "?([A-Za-z0-9_-]+)"?', text)
        if match:
            found[key] = typed(match.group(1), schema)
    return found


def tool_call(name: str, arguments: object) -> Message:
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": encoded},
    }


def asked_tool(body: Mapping[str, Any]) -> tuple[str, dict[str, object]] | None:
    """The tool the request names, with the argument values it gives; None if none."""
    text = user_text(body)
    for tool in body.get("tools", []):
        function = tool["function"]
        if re.search(rf"\b{re.escape(function['name'])}\b", text):
            return function["name"], values_from(text, function["parameters"]["properties"])
    return None


def asked_word(text: str) -> str:
    match = re.search(r"Say the word (\w+)", text)
    return match.group(1) if match else "hello"


def good_chat(body: Mapping[str, Any]) -> Message:
    if "tools" in body:
        call = asked_tool(body)
        if call is None:
            return {"content": "I can answer that without a tool."}
        return {"content": None, "tool_calls": [tool_call(*call)]}
    response_format = body.get("response_format")
    if response_format is not None:
        schema = response_format["json_schema"]["schema"]
        return {"content": json.dumps(values_from(user_text(body), schema["properties"]))}
    image = image_of(body)
    if image is not None:
        return {"content": colour_name(first_pixel(image)).capitalize() + "."}
    return {"content": f"{asked_word(user_text(body)).capitalize()}."}


def hashed_vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [(b - 127.5) / 127.5 for b in digest[:DIMENSION]]


def hashed_seed(texts: list[str]) -> int:
    return int.from_bytes(hashlib.sha256("\0".join(texts).encode()).digest()[:8], "big")


def good_embed(texts: list[str]) -> list[list[float]]:
    """Paraphrases share a direction (their pair's), plus a little noise of their own."""
    topics = {s: i for i, p in enumerate(PARAPHRASES) for s in (p.statement, p.paraphrase)}
    vectors = []
    for text in texts:
        noise = [0.05 * x for x in hashed_vector(text)]
        if text in topics:
            noise[topics[text] % DIMENSION] += 1.0
        vectors.append(noise)
    return vectors


def good_rerank(query: str, documents: list[str]) -> list[float]:
    answers = {a.question: a.passage for a in ANSWERS}
    return [0.9 if answers.get(query) == d else 0.1 / (1 + i) for i, d in enumerate(documents)]


GOOD = StubBackend(chat=good_chat, embed=good_embed, rerank=good_rerank)


# --- known-bad: each the good server with one thing wrong ----------------------------------


def _only(kind: str, wrong: Callable[[Mapping[str, Any]], Message]) -> Callable[..., Message]:
    """``wrong`` for requests of one kind (plain, tools, structured, vision); good otherwise."""

    def chat(body: Mapping[str, Any]) -> Message:
        if "tools" in body:
            got = "tools"
        elif "response_format" in body:
            got = "structured"
        elif image_of(body) is not None:
            got = "vision"
        else:
            got = "plain"
        return wrong(body) if got == kind else good_chat(body)

    return chat


def _other_word(body: Mapping[str, Any]) -> Message:
    asked = asked_word(user_text(body))
    return {"content": f"{next(w for w in WORDS if w != asked).capitalize()}."}


def _call_in_content(body: Mapping[str, Any]) -> Message:
    call = asked_tool(body)
    if call is None:
        return good_chat(body)
    return {"content": json.dumps({"name": call[0], "arguments": call[1]})}


def _wrong_function(body: Mapping[str, Any]) -> Message:
    call = asked_tool(body)
    if call is None:
        return good_chat(body)
    other = next(t["function"]["name"] for t in body["tools"] if t["function"]["name"] != call[0])
    return {"content": None, "tool_calls": [tool_call(other, call[1])]}


def _changed_arguments(change: Callable[[dict[str, object]], object]) -> Callable[..., Message]:
    def chat(body: Mapping[str, Any]) -> Message:
        call = asked_tool(body)
        if call is None:
            return good_chat(body)
        return {"content": None, "tool_calls": [tool_call(call[0], change(dict(call[1])))]}

    return chat


def _without_number(arguments: dict[str, object]) -> object:
    return {k: v for k, v in arguments.items() if not isinstance(v, int)}


def _number_as_text(arguments: dict[str, object]) -> object:
    return {k: str(v) if isinstance(v, int) else v for k, v in arguments.items()}


def _other_code(arguments: dict[str, object]) -> object:
    return {k: v if isinstance(v, int) else f"{v}X" for k, v in arguments.items()}


def _arguments_as_object(body: Mapping[str, Any]) -> Message:
    call = asked_tool(body)
    if call is None:
        return good_chat(body)
    called = tool_call(*call)
    called["function"]["arguments"] = call[1]  # not a JSON string
    return {"content": None, "tool_calls": [called]}


def _calls_always(body: Mapping[str, Any]) -> Message:
    call = asked_tool(body)
    if call is not None:
        return good_chat(body)
    first = body["tools"][0]["function"]["name"]
    return {"content": None, "tool_calls": [tool_call(first, {"name": "anything"})]}


def _prose(body: Mapping[str, Any]) -> Message:
    return {"content": "Sure! " + user_text(body).replace("Return a JSON object with", "Here is")}


def _json_from_prompt(body: Mapping[str, Any]) -> Message:
    """What a capable model answers when the server drops the schema: the prompt's keys only."""
    text = user_text(body)
    keys = re.findall(r'"(key_\w+)" set to', text)
    return {"content": json.dumps(values_from(text, {key: {} for key in keys}))}


def _wrong_values(body: Mapping[str, Any]) -> Message:
    schema = body["response_format"]["json_schema"]["schema"]
    value = values_from(user_text(body), schema["properties"])
    return {
        "content": json.dumps({k: v + 1 if isinstance(v, int) else v for k, v in value.items()})
    }


def _fenced_json(body: Mapping[str, Any]) -> Message:
    return {"content": f"```json\n{good_chat(body)['content']}\n```"}


def _always(text: str) -> Callable[..., Message]:
    return lambda body: {"content": text}


def _no_projector(body: Mapping[str, Any]) -> Message:
    hint = "if this is unexpected, you may need to provide the mmproj"
    raise StubError(500, f"image input is not supported - hint: {hint}")


def _random_vectors(texts: list[str]) -> list[list[float]]:
    rng = random.Random(hashed_seed(texts))  # noise, yet the same for the same request
    return [[rng.gauss(0.0, 1.0) for _ in range(DIMENSION)] for _ in texts]


def _constant_vectors(texts: list[str]) -> list[list[float]]:
    return [[1.0] + [0.0] * (DIMENSION - 1) for _ in texts]


def _all_equal_vectors(texts: list[str]) -> list[list[float]]:
    return [[0.5] * DIMENSION for _ in texts]


def _zero_vectors(texts: list[str]) -> list[list[float]]:
    return [[0.0] * DIMENSION for _ in texts]


def _length_vectors(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, 0.5] for t in texts]  # tests/support/real/upstream.py's answer


def _hashed_vectors(texts: list[str]) -> list[list[float]]:
    return [hashed_vector(t) for t in texts]


def _given_order(query: str, documents: list[str]) -> list[float]:
    return [1.0 / (1 + i) for i in range(len(documents))]


def _reversed_order(query: str, documents: list[str]) -> list[float]:
    return [float(i) for i in range(len(documents))]


def _equal_scores(query: str, documents: list[str]) -> list[float]:
    return [0.5 for _ in documents]


def _random_scores(query: str, documents: list[str]) -> list[float]:
    rng = random.Random(hashed_seed([query, *documents]))
    return [rng.random() for _ in documents]


def _longest_first(query: str, documents: list[str]) -> list[float]:
    return [float(len(d)) for d in documents]


def _chat(chat: Callable[..., Message]) -> StubBackend:
    return evolve(GOOD, chat=chat)


KNOWN_BAD: dict[str, tuple[Capability, StubBackend]] = {
    "chat: fluent text without the word": (
        Capability.CHAT,
        _chat(_only("plain", _always("Of course! I am always happy to help you with that."))),
    ),
    "chat: echoes the instruction": (
        Capability.CHAT,
        _chat(_only("plain", lambda body: {"content": f"echo: {user_text(body)}"})),
    ),
    "chat: says another word": (Capability.CHAT, _chat(_only("plain", _other_word))),
    "chat: always the same word": (Capability.CHAT, _chat(_only("plain", _always("Apple.")))),
    "chat: empty content": (Capability.CHAT, _chat(_only("plain", _always("")))),
    "tools: the call as JSON text in content": (
        Capability.TOOLS,
        _chat(_only("tools", _call_in_content)),
    ),
    "tools: calls the other function": (Capability.TOOLS, _chat(_only("tools", _wrong_function))),
    "tools: omits a required argument": (
        Capability.TOOLS,
        _chat(_only("tools", _changed_arguments(_without_number))),
    ),
    "tools: an integer argument as a string": (
        Capability.TOOLS,
        _chat(_only("tools", _changed_arguments(_number_as_text))),
    ),
    "tools: a different argument value": (
        Capability.TOOLS,
        _chat(_only("tools", _changed_arguments(_other_code))),
    ),
    "tools: arguments as an object, not a JSON string": (
        Capability.TOOLS,
        _chat(_only("tools", _arguments_as_object)),
    ),
    "tools: calls a tool on the irrelevant request": (
        Capability.TOOLS,
        _chat(_only("tools", _calls_always)),
    ),
    "tools: ignores tools, answers text": (
        Capability.TOOLS,
        _chat(_only("tools", _always("I would look that up for you."))),
    ),
    "structured-output: ignores response_format (prose)": (
        Capability.STRUCTURED_OUTPUT,
        _chat(_only("structured", _prose)),
    ),
    "structured-output: JSON from the prompt, schema ignored": (
        Capability.STRUCTURED_OUTPUT,
        _chat(_only("structured", _json_from_prompt)),
    ),
    "structured-output: fits the schema, wrong values": (
        Capability.STRUCTURED_OUTPUT,
        _chat(_only("structured", _wrong_values)),
    ),
    "structured-output: JSON inside a code fence": (
        Capability.STRUCTURED_OUTPUT,
        _chat(_only("structured", _fenced_json)),
    ),
    "vision-input: always red": (Capability.VISION_INPUT, _chat(_only("vision", _always("Red.")))),
    "vision-input: lists every colour": (
        Capability.VISION_INPUT,
        _chat(_only("vision", _always("It is red, green, blue, yellow, black or white."))),
    ),
    "vision-input: no projector (HTTP 500)": (
        Capability.VISION_INPUT,
        _chat(_only("vision", _no_projector)),
    ),
    "embed: random vectors": (Capability.EMBED, evolve(GOOD, embed=_random_vectors)),
    "embed: one constant vector": (Capability.EMBED, evolve(GOOD, embed=_constant_vectors)),
    "embed: all components equal": (Capability.EMBED, evolve(GOOD, embed=_all_equal_vectors)),
    "embed: zero vectors": (Capability.EMBED, evolve(GOOD, embed=_zero_vectors)),
    "embed: length of the text": (Capability.EMBED, evolve(GOOD, embed=_length_vectors)),
    "embed: a hash of the text": (Capability.EMBED, evolve(GOOD, embed=_hashed_vectors)),
    "rerank: the given order": (Capability.RERANK, evolve(GOOD, rerank=_given_order)),
    "rerank: the given order reversed": (Capability.RERANK, evolve(GOOD, rerank=_reversed_order)),
    "rerank: all scores equal": (Capability.RERANK, evolve(GOOD, rerank=_equal_scores)),
    "rerank: random scores": (Capability.RERANK, evolve(GOOD, rerank=_random_scores)),
    "rerank: longest passage first": (Capability.RERANK, evolve(GOOD, rerank=_longest_first)),
}

# Wrong on every route at once: a body that is not JSON, and the echo server of upstream.py.
NOT_JSON = evolve(GOOD, raw=lambda: PlainTextResponse("OK"))
