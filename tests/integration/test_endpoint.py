"""The endpoint under real uvicorn on 127.0.0.1, with the official ``openai`` client as its peer.

Also hostile HTTP on raw sockets, the endpoint as its own process reading the state, and the
fallback user service restarting a killed endpoint. Nothing waits unbounded.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from attrs import evolve

from nodeau.adapters.service_specs import EndpointServiceSpec
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.adapters.supervised_process import BackgroundProcess
from nodeau.apps.endpoint.app import MAX_BODY_BYTES, Unavailable, Upstream, create_app
from nodeau.apps.endpoint.connections import Target as Destination
from nodeau.apps.endpoint.model_server import Answer, Headers
from nodeau.apps.endpoint.serve import (
    HOST,
    CachedLookup,
    endpoint_config,
    serve,
    upstream_from_state,
)
from nodeau.domain.tasks import Task, routes_for
from nodeau.domain.workloads import ServerExit, WorkloadState
from tests.support.builders.admissions import decider, fleet_of
from tests.support.real.endpoint import (
    BOUND_S,
    MODEL,
    ROOT,
    Target,
    openai_client,
    point_at,
    raw_exchange,
    record_workload,
    running_endpoint,
    still_serves,
    upstream_at,
    wait_until_answering,
)
from tests.support.real.upstream import (
    STREAM_CHUNKS,
    MinimalUpstream,
    bound_port,
    free_port,
    loopback_socket,
    running_upstream,
    serving,
)


@pytest.fixture
def upstream() -> MinimalUpstream:
    return MinimalUpstream(model=MODEL, chunk_delay_s=0.02)


@pytest.fixture
def chat(upstream: MinimalUpstream) -> Iterator[str]:
    """An endpoint for a chat workload whose model server runs."""
    with running_upstream(upstream) as base, running_endpoint(Target(upstream_at(base))) as url:
        yield url


# -- loopback only


def test_the_endpoint_listens_on_loopback_only_and_no_parameter_changes_that(
    upstream: MinimalUpstream,
) -> None:
    server = uvicorn.Server(endpoint_config(create_app(Target()), 0, log_level="warning"))
    with serving(server):
        addresses = [s.getsockname() for srv in server.servers for s in srv.sockets]
    assert HOST == "127.0.0.1"
    assert [a[0] for a in addresses] == ["127.0.0.1"]
    assert "host" not in inspect.signature(serve).parameters
    assert "host" not in inspect.signature(endpoint_config).parameters


# -- the OpenAI API through the endpoint


def test_a_chat_completion_goes_through(chat: str, upstream: MinimalUpstream) -> None:
    with openai_client(chat) as client:
        answer = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}]
        )
    assert answer.choices[0].message.content == "echo: hello"
    seen = upstream.seen[-1]
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert json.loads(seen.body)["messages"] == [{"role": "user", "content": "hello"}]
    assert seen.header("authorization") == [], "the caller's key stays at the endpoint"


def test_a_streamed_chat_completion_is_passed_on_as_it_arrives(
    chat: str, upstream: MinimalUpstream
) -> None:
    """The upstream sends its first event, then waits until the client has received it
    before sending the rest: a buffering proxy would only let it go after the wait ran out
    (``released_by_client`` False). The client's first event also arrives before the
    upstream sent its last one."""
    upstream.gate = threading.Event()
    received: list[str] = []
    first_received_at = None
    with openai_client(chat) as client:
        stream = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        for chunk in stream:
            if first_received_at is None:
                first_received_at = time.monotonic()
                upstream.gate.set()
            received.append(chunk.choices[0].delta.content or "")
    log = upstream.streams[-1]
    assert log.released_by_client is True
    assert received == [f"hi-{i} " for i in range(STREAM_CHUNKS)]
    assert first_received_at is not None
    assert first_received_at < log.sent_at[-1]


def test_a_text_completion_goes_through(chat: str) -> None:
    with openai_client(chat) as client:
        answer = client.completions.create(model=MODEL, prompt="once")
    assert answer.choices[0].text == "echo: once"


def test_embeddings_go_through_for_an_embedding_workload(upstream: MinimalUpstream) -> None:
    with (
        running_upstream(upstream) as base,
        running_endpoint(Target(upstream_at(base, Task.EMBED))) as url,
        openai_client(url) as client,
    ):
        answer = client.embeddings.create(model=MODEL, input=["a", "abc"])
    assert [d.embedding for d in answer.data] == [[1.0, 1.0, 0.5], [3.0, 1.0, 0.5]]


def test_rerank_goes_through_for_a_rerank_workload(upstream: MinimalUpstream) -> None:
    with (
        running_upstream(upstream) as base,
        running_endpoint(Target(upstream_at(base, Task.RERANK))) as url,
    ):
        response = httpx.post(
            f"{url}/v1/rerank?probe=1",
            json={"model": MODEL, "query": "q", "documents": ["a", "b"]},
            timeout=BOUND_S,
        )
    assert response.status_code == 200
    assert response.json()["results"] == [
        {"index": 0, "relevance_score": 1.0},
        {"index": 1, "relevance_score": 0.5},
    ]
    assert (upstream.seen[-1].path, upstream.seen[-1].query) == ("/v1/rerank", "probe=1")


def test_models_lists_the_workload_model(chat: str) -> None:
    with openai_client(chat) as client:
        listed = [m.id for m in client.models.list()]
        one = client.models.retrieve(MODEL)
        with pytest.raises(openai.NotFoundError, match="the model 'other' is not served here"):
            client.models.retrieve("other")
    assert listed == [MODEL]
    assert (one.id, one.owned_by) == (MODEL, "nodeau")


def test_headers_are_forwarded_except_hop_by_hop_and_host(
    chat: str, upstream: MinimalUpstream
) -> None:
    response = httpx.post(
        f"{chat}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "h"}]},
        headers={"X-Custom": "kept", "Connection": "keep-alive, x-private", "X-Private": "no"},
        timeout=BOUND_S,
    )
    assert response.status_code == 200
    seen = upstream.seen[-1]
    (host,) = seen.header("host")
    assert seen.header("x-custom") == ["kept"]
    assert seen.header("x-private") == []
    assert seen.header("connection") == []
    assert seen.header("accept-encoding") == [response.request.headers["accept-encoding"]]
    assert host.startswith("127.0.0.1:")
    assert host != chat.removeprefix("http://")  # the upstream's own address, not ours
    assert "transfer-encoding" not in response.headers


# -- errors, each an OpenAI-style JSON error


def test_a_route_of_another_task_is_a_404_naming_the_task(chat: str) -> None:
    with openai_client(chat) as client, pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model=MODEL, input="x")
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["type"] == "not_found"
    assert error["message"] == (
        f"/v1/embeddings is not served here: {MODEL} runs the chat task, which answers "
        f"{', '.join(routes_for(Task.CHAT))} (and /v1/models)"
    )


def test_an_unknown_route_is_a_json_404(chat: str) -> None:
    response = httpx.get(f"{chat}/v2/nothing", timeout=BOUND_S)
    assert response.status_code == 404
    assert response.json()["error"]["message"].startswith("no route /v2/nothing:")


def test_a_model_that_is_not_running_is_a_503() -> None:
    with running_endpoint(Target(None)) as url, openai_client(url) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model=MODEL, messages=[])
        health = httpx.get(f"{url}/health", timeout=BOUND_S).json()
    assert caught.value.status_code == 503
    assert caught.value.body == {
        "message": "the model of this endpoint is not running (stopped, or still starting); "
        "this endpoint answers again once it runs",
        "type": "unavailable",
        "code": 503,
    }
    assert health == {"status": "ok", "model": None, "task": None, "model_server": "not running"}


RESTARTING = Unavailable(
    message="tiny is restarting: its model server was killed by signal 9 (SIGKILL) at 09:30:05;"
    " restart 1, next attempt at 09:30:15",
    retry_after_s=7,
    model_server="restarting",
)


def test_a_restarting_model_server_is_a_503_with_retry_after_on_every_route() -> None:
    with running_endpoint(Target(RESTARTING)) as url, openai_client(url) as client:
        with pytest.raises(openai.APIStatusError) as chat:
            client.chat.completions.create(model=MODEL, messages=[])
        with pytest.raises(openai.APIStatusError) as models:
            client.models.list()
        health = httpx.get(f"{url}/health", timeout=BOUND_S).json()
    for caught in (chat, models):
        assert caught.value.status_code == 503
        assert caught.value.response.headers["retry-after"] == "7"
        assert caught.value.body == {
            "message": "tiny is restarting: its model server was killed by signal 9 (SIGKILL) at"
            " 09:30:05; restart 1, next attempt at 09:30:15; this endpoint answers again once it"
            " serves (retry after 7 s)",
            "type": "unavailable",
            "code": 503,
        }
    assert health == {"status": "ok", "model": None, "task": None, "model_server": "restarting"}


def test_the_official_client_retries_a_restarting_endpoint_when_told_and_gets_its_answer(
    upstream: MinimalUpstream,
) -> None:
    quick = evolve(RESTARTING, retry_after_s=1)
    target = Target(quick)
    seen: list[int] = []

    def answer_after_the_first_503(response: Any) -> None:  # openai's own httpx
        seen.append(response.status_code)
        if response.status_code == 503:
            target.upstream = upstream_at(base)  # restarted meanwhile

    hooks = {"response": [answer_after_the_first_503]}
    with (
        running_upstream(upstream) as base,
        running_endpoint(target) as url,
        openai.OpenAI(
            base_url=f"{url}/v1",
            api_key="unused",
            timeout=BOUND_S,
            http_client=openai.DefaultHttpxClient(event_hooks=hooks),
        ) as client,
    ):
        answer = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "back?"}]
        )
    assert answer.choices[0].message.content == "echo: back?"
    assert seen == [503, 200]


def test_a_failing_lookup_is_a_503_naming_the_failure() -> None:
    target = Target()
    target.error = RuntimeError("/state.sqlite3: cannot read (database is locked)")
    with running_endpoint(target) as url:
        response = httpx.get(f"{url}/v1/models", timeout=BOUND_S)
    assert response.status_code == 503
    assert response.json()["error"]["message"] == (
        "cannot find this endpoint's model server: /state.sqlite3: cannot read (database is locked)"
    )


def test_an_unreachable_model_server_is_a_502_naming_it() -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    with running_endpoint(Target(upstream_at(gone))) as url, openai_client(url) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model=MODEL, messages=[])
        still_serves(url)
    assert caught.value.status_code == 502
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"] == (
        f"cannot reach the model server at {gone}: nothing answers there (it may be restarting)"
    )


def test_a_model_server_restarted_on_another_port_is_found_without_restarting(
    upstream: MinimalUpstream,
) -> None:
    target = Target()
    later = MinimalUpstream(model=MODEL)
    with running_endpoint(target) as url, openai_client(url) as client:
        with running_upstream(upstream) as first:
            target.upstream = upstream_at(first)
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "1"}])
        with running_upstream(later) as second:
            target.upstream = upstream_at(second)
            answer = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "2"}]
            )
    assert first != second
    assert answer.choices[0].message.content == "echo: 2"
    assert [json.loads(s.body)["messages"][0]["content"] for s in upstream.seen] == ["1"]
    assert [json.loads(s.body)["messages"][0]["content"] for s in later.seen] == ["2"]


class Exploding:
    """Connections with a bug: every send raises ZeroDivisionError."""

    async def send(
        self, target: Destination, method: bytes, headers: Headers, body: bytes
    ) -> Answer:
        raise ZeroDivisionError("a bug")

    async def aclose(self) -> None:
        pass


def test_an_unexpected_failure_is_a_json_500_and_the_endpoint_keeps_serving() -> None:
    target = Target(upstream_at("http://127.0.0.1:9"))
    with running_endpoint(target, connections=Exploding()) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json={}, timeout=BOUND_S)
        still_serves(url)
    assert response.status_code == 500
    assert response.json()["error"] == {
        "message": "the endpoint failed on this request (ZeroDivisionError: a bug); "
        "it keeps serving",
        "type": "internal_error",
        "code": 500,
    }


# -- hostile HTTP


def test_a_body_over_the_limit_is_a_413_and_the_endpoint_keeps_serving(
    chat: str, upstream: MinimalUpstream
) -> None:
    huge = b"x" * (MAX_BODY_BYTES + 1)
    declared = httpx.post(f"{chat}/v1/chat/completions", content=huge, timeout=BOUND_S)

    def pieces() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(MAX_BODY_BYTES // (1024 * 1024) + 1):
            yield b"y" * (1024 * 1024)

    chunked = httpx.post(f"{chat}/v1/chat/completions", content=pieces(), timeout=BOUND_S)
    for response in (declared, chunked):
        assert response.status_code == 413
        assert response.json()["error"]["message"] == (
            "the request body is larger than this endpoint accepts (32 MiB)"
        )
    assert upstream.seen == []
    with openai_client(chat) as client:
        answer = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "after"}]
        )
    assert answer.choices[0].message.content == "echo: after"


def test_a_garbage_request_line_is_a_400_and_the_endpoint_keeps_serving(chat: str) -> None:
    answer = raw_exchange(chat, b"\x16\x03\x01 GARBAGE \xff\xfe\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"\r\ncontent-type: application/json\r\n" in head
    assert json.loads(body)["error"] == {
        "message": "the request is not valid HTTP/1.1 (Invalid method encountered); "
        "send a request line, headers and a blank line",
        "type": "invalid_request",
        "code": 400,
    }
    still_serves(chat)


def test_a_very_long_header_is_a_431_and_the_endpoint_keeps_serving(chat: str) -> None:
    request = (
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: "
        + b"a" * (4 * 1024 * 1024)
        + b"\r\nConnection: close\r\n\r\n"
    )
    answer = raw_exchange(chat, request)
    assert answer.startswith(b"HTTP/1.1 431 ")
    still_serves(chat)


def test_an_invalid_content_length_is_a_400(chat: str) -> None:
    answer = raw_exchange(
        chat, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 400 ")
    still_serves(chat)


# -- the upstream misbehaving mid-response


@contextmanager
def breaking_upstream(head: bytes, body_part: bytes) -> Iterator[str]:
    """A server that answers one request with ``head`` and part of a body, then hangs up."""
    sock = loopback_socket()
    sock.listen(1)
    sock.settimeout(BOUND_S)

    def answer_once() -> None:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(BOUND_S)
            conn.recv(65536)
            conn.sendall(head + body_part)

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        thread.join(BOUND_S)
        sock.close()


@pytest.mark.parametrize(
    ("head", "body_part"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b'{"choices": ['),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            b'e\r\ndata: {"a":1}\n\r\n',
        ),
    ],
    ids=["with-length", "streamed"],
)
def test_an_upstream_that_breaks_off_leaves_the_response_incomplete(
    head: bytes, body_part: bytes
) -> None:
    with (
        breaking_upstream(head, body_part) as base,
        running_endpoint(Target(upstream_at(base))) as url,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(f"{url}/v1/chat/completions", json={}, timeout=BOUND_S)
        still_serves(url)


def test_a_client_that_leaves_mid_stream_stops_the_stream_upstream(
    chat: str, upstream: MinimalUpstream
) -> None:
    """The upstream waits for the gate after its first event; the client reads that event
    and hangs up without opening the gate. Only the endpoint closing its upstream response
    ends the stream before the gate's wait runs out and the rest is sent."""
    upstream.gate = threading.Event()
    with (
        httpx.Client(timeout=BOUND_S) as client,
        client.stream(
            "POST", f"{chat}/v1/chat/completions", json={"messages": [], "stream": True}
        ) as response,
    ):
        first = next(response.iter_raw())
    deadline = time.monotonic() + BOUND_S
    while not upstream.streams[-1].ended and time.monotonic() < deadline:
        time.sleep(0.01)
    log = upstream.streams[-1]
    assert first.startswith(b"data: ")
    assert log.ended
    assert log.released_by_client is None
    assert len(log.sent_at) == 1


def test_a_client_that_leaves_before_the_answer_cancels_the_request_upstream(
    chat: str, upstream: MinimalUpstream
) -> None:
    """The upstream holds a plain answer until the gate opens; the client gives up first.
    Only the endpoint dropping its upstream request lets the upstream see its client leave
    before the gate's wait runs out."""
    upstream.gate = threading.Event()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{chat}/v1/chat/completions",
            json={"messages": []},
            timeout=httpx.Timeout(BOUND_S, read=0.5),
        )
    deadline = time.monotonic() + BOUND_S
    while upstream.waits == ["waiting"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert upstream.waits == ["client left"]
    upstream.gate.set()
    still_serves(chat)


def test_under_another_server_a_client_that_leaves_still_cancels_the_request_upstream(
    upstream: MinimalUpstream,
) -> None:
    """Under uvicorn's h11 protocol (no ``CLIENT_GONE`` extension) the endpoint watches
    ``receive`` instead: the held answer is still given up once the client leaves."""
    upstream.gate = threading.Event()
    with running_upstream(upstream) as base:
        app = create_app(Target(upstream_at(base)))
        config = uvicorn.Config(app, port=0, http="h11", loop="asyncio", log_level="warning")
        with serving(uvicorn.Server(config)) as server:
            url = f"http://127.0.0.1:{bound_port(server)}"
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(
                    f"{url}/v1/chat/completions",
                    json={"messages": []},
                    timeout=httpx.Timeout(BOUND_S, read=0.5),
                )
            deadline = time.monotonic() + BOUND_S
            while upstream.waits == ["waiting"] and time.monotonic() < deadline:
                time.sleep(0.01)
            upstream.gate.set()
    assert upstream.waits == ["client left"]


# -- the endpoint as its own process, reading the state


def listening_addresses(port: int) -> set[str]:
    """The local addresses listening on ``port``, from /proc/net/tcp and tcp6 (Linux)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        lines = Path(table).read_text().splitlines()[1:]
        for line in lines:
            local, _remote, state = line.split()[1:4]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_the_state_says_where_a_running_workload_is_and_nothing_for_others(
    tmp_path: Path,
) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite3", clock=lambda: datetime.now(UTC))
    lookup = upstream_from_state(store, MODEL)
    assert lookup() is None  # no such workload
    store.admit(MODEL, decider(MODEL, fleet_of(1), datetime.now(UTC))).unwrap()
    assert lookup() is None  # admitted, no server recorded yet
    point_at(store, MODEL, "http://127.0.0.1:4321")
    found = lookup()
    assert found is not None
    assert (found.base_url, found.task, found.model_name) == (
        "http://127.0.0.1:4321",
        Task.CHAT,
        MODEL,
    )
    store.release(
        MODEL, lambda r: evolve(r, workload=evolve(r.workload, state=WorkloadState.STOPPED))
    )
    assert lookup() is None  # finished, even with its last server still recorded


def test_the_state_says_a_restarting_workload_is_unavailable_and_when_to_come_back(
    tmp_path: Path,
) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite3", clock=lambda: datetime.now(UTC))
    store.admit(MODEL, decider(MODEL, fleet_of(1), datetime.now(UTC))).unwrap()
    point_at(store, MODEL, "http://127.0.0.1:4321")
    killed = datetime(2026, 11, 30, 9, 30, 5, tzinfo=UTC)
    store.update(
        MODEL,
        lambda r: evolve(
            r,
            workload=evolve(
                r.workload,
                state=WorkloadState.RESTARTING,
                since=killed,
                last_exit=ServerExit.killed(9, "SIGKILL", killed),
                next_attempt=killed + timedelta(seconds=10),
            ),
        ),
    )
    lookup = upstream_from_state(store, MODEL, lambda: killed + timedelta(seconds=4))
    assert lookup() == RESTARTING


def test_a_forgotten_lookup_is_asked_again_and_one_made_across_a_forget_is_not_kept() -> None:
    now = [100.0]
    calls: list[float] = []
    cached: CachedLookup

    def lookup() -> Upstream | None:
        calls.append(now[0])
        if len(calls) == 2:
            cached.forget()  # the state changed while this lookup read it
        return None

    cached = CachedLookup(lookup, ttl_s=1.0, clock=lambda: now[0])
    cached()
    cached.forget()
    cached()  # asked again at once; made across a forget, so not kept
    cached()
    now[0] = 100.5
    cached()
    assert calls == [100.0, 100.0, 100.0]


def test_a_lookup_is_remembered_for_its_time_to_live_and_its_failures_are_not() -> None:
    now = [100.0]
    answers: list[Upstream | Exception | None] = [
        None,
        upstream_at("http://127.0.0.1:1"),
        RuntimeError("locked"),
        upstream_at("http://127.0.0.1:2"),
    ]
    calls: list[float] = []

    def lookup() -> Upstream | None:
        calls.append(now[0])
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    cached = CachedLookup(lookup, ttl_s=1.0, clock=lambda: now[0])
    seen = [cached()]
    now[0] = 100.9
    seen.append(cached())  # None remembered too
    now[0] = 101.0
    seen.append(cached())
    now[0] = 102.5
    with pytest.raises(RuntimeError, match="locked"):
        cached()
    seen.append(cached())  # a failure is asked again at once
    assert calls == [100.0, 101.0, 102.5, 102.5]
    assert seen == [
        None,
        None,
        upstream_at("http://127.0.0.1:1"),
        upstream_at("http://127.0.0.1:2"),
    ]


@pytest.mark.slow
def test_the_endpoint_process_serves_from_the_state_and_follows_a_restart(
    tmp_path: Path, upstream: MinimalUpstream
) -> None:
    state = tmp_path / "state.sqlite3"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    later = MinimalUpstream(model=MODEL)
    with running_upstream(upstream) as first, running_upstream(later) as second:
        store = record_workload(state, MODEL, first)
        command = [sys.executable, "-m", "nodeau.apps.endpoint", "--workload", MODEL]
        command += ["--port", str(port), "--state", str(state), "--log-level", "warning"]
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL)
        try:
            wait_until_answering(url, process)
            listening = listening_addresses(port)
            with openai_client(url) as client:
                models = [m.id for m in client.models.list()]
                client.chat.completions.create(model=MODEL, messages=[])
                point_at(store, MODEL, second)
                deadline = time.monotonic() + BOUND_S
                while not later.seen and time.monotonic() < deadline:
                    client.chat.completions.create(model=MODEL, messages=[])
                    time.sleep(0.1)
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(BOUND_S)
    assert listening == {"0100007F"}  # 127.0.0.1, and only there
    assert models == [MODEL]
    assert len(upstream.seen) >= 1
    assert len(later.seen) == 1
    assert code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after shutting down


# -- the fallback user service


@pytest.mark.slow
def test_the_background_service_restarts_a_killed_endpoint_and_stops(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = BackgroundProcess(tmp_path / "run")
    spec = EndpointServiceSpec(
        workload="w1",
        port=port,
        state_path=tmp_path / "state.sqlite3",
        log_path=tmp_path / "logs" / "endpoint-w1.log",
        python=Path(sys.executable),
    )
    service.install(spec)
    try:
        service.start("w1")
        running_at_start = service.running("w1")
        wait_until_answering(url)
        first = json.loads((tmp_path / "run" / "w1.pid").read_text())
        assert first["endpoint"] is not None  # recorded when started, before it could answer
        os.kill(first["endpoint"], signal.SIGKILL)
        deadline = time.monotonic() + BOUND_S
        pids = first
        while pids["endpoint"] == first["endpoint"] and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = json.loads((tmp_path / "run" / "w1.pid").read_text())
        wait_until_answering(url)
        health = httpx.get(f"{url}/health", timeout=BOUND_S).json()
    finally:
        service.stop("w1")
    assert running_at_start
    assert pids["supervisor"] == first["supervisor"]
    assert pids["endpoint"] != first["endpoint"]
    assert health["model_server"] == "not running"  # the state has no such workload
    assert not service.running("w1")
    assert listening_addresses(port) == set()
    assert "restarting it in 1 s" in spec.log_path.read_text()
