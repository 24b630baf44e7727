"""The dashboard's guard, in process: the token on every route, compared in constant time and
exchanged for an HttpOnly SameSite=Strict cookie; Host and Origin; 405 for every method but
GET apart from the stop action and the Playground; the CSRF token on those; no CORS header.
Also the token file (0600, picked up when it changes) and the Playground's bodies and
snippets."""

from __future__ import annotations

import json
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from nodeau.adapters.dashboard_token import TokenFile, new_token, write_owner_only
from nodeau.adapters.endpoint_client import HttpxEndpointClient
from nodeau.apps.dashboard import playground
from nodeau.apps.dashboard.app import create_app
from nodeau.apps.dashboard.callers import DashboardCallers
from nodeau.apps.dashboard.guard import Guard
from nodeau.apps.dashboard.session import cookie_name, csrf_value, matches, session_value
from nodeau.apps.planes.plane import Plane
from nodeau.ports.errors import NodeauError
from tests.support.builders.dashboard_views import (
    NOW,
    TARGET,
    FakePlane,
    FeatureViews,
    fleet,
    machine,
    plan,
)

PORT = 8123
BASE = f"http://127.0.0.1:{PORT}"


class StoppingPlane(FakePlane):
    def __init__(self, **views: Any) -> None:
        super().__init__(**views)
        self.stopped: list[str] = []

    @property
    def batches(self) -> StoppingBatches:
        return StoppingBatches(self, "batches")


class StoppingBatches(FeatureViews):
    def stop(self, name: str) -> str:
        if name != "job":
            raise NodeauError(f"no batch job called {name!r}")
        assert isinstance(self._plane, StoppingPlane)
        self._plane.stopped.append(name)
        return f"{name}: stopped; its card is free"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "dashboard" / "token"
    write_owner_only(path, b"the-token\n")
    return path


@pytest.fixture
def plane() -> StoppingPlane:
    return StoppingPlane(
        machines=fleet(machine("box-a")),
        workloads=(),
        batches=(),
        copies=NodeauError("no copies on one machine"),
        recovery=NodeauError("none"),
        plan=plan(),
    )


@pytest.fixture
def client(token_file: Path, plane: StoppingPlane) -> Iterator[TestClient]:
    app = create_app(
        cast(Plane, plane),
        client=HttpxEndpointClient(),
        model_rows=lambda: (),
        token=TokenFile(token_file),
        clock=lambda: NOW,
    )
    with TestClient(app, base_url=BASE, follow_redirects=False) as c:
        yield c


BEARER = {"Authorization": "Bearer the-token"}
ROUTES = ("/", "/assets/dashboard.js", "/assets/dashboard.css", "/api/session", "/api/board")


# -- the token


def test_matches_only_the_same_token() -> None:
    assert matches("abc", "abc")
    assert not matches("abc", "abd")
    assert not matches("abc", None)
    assert not matches("", "")  # no token read: nothing matches it
    assert new_token() != new_token() and len(new_token()) >= 43


def test_the_token_file_is_owner_only_and_read_again_when_it_changes(token_file: Path) -> None:
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    reader = TokenFile(token_file)
    assert reader.current() == "the-token"
    write_owner_only(token_file, b"a-new-one")
    assert reader.current() == "a-new-one"
    token_file.unlink()
    assert reader.current() == ""


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_needs_the_token(client: TestClient, route: str) -> None:
    assert client.get(route).status_code == 401
    assert client.get(route, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get(route, headers={"Cookie": f"{cookie_name(PORT)}=wrong"}).status_code == 401
    assert client.get(route, headers=BEARER).status_code == 200


def test_the_printed_address_sets_the_cookie_and_drops_the_token(client: TestClient) -> None:
    wrong = client.get("/?token=nope")
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    first = client.get("/?token=the-token")
    assert first.status_code == 303
    assert first.headers["location"] == "/"
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{cookie_name(PORT)}={session_value('the-token')};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "the-token" not in cookie
    page = client.get("/")  # the client keeps the cookie, as a browser does
    assert page.status_code == 200 and "<title>Nodeau dashboard</title>" in page.text
    assert client.get("/api/board").json()["plane"] == "a fake plane"


def test_a_protocol_relative_path_is_not_a_redirect_elsewhere(token_file: Path) -> None:
    guard = Guard(app=cast(Any, None), token=TokenFile(token_file))
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "path": "//evil.example/",
        "query_string": b"token=the-token",
        "server": ("127.0.0.1", PORT),
        "headers": [(b"host", f"127.0.0.1:{PORT}".encode())],
    }
    answer = guard.answer(scope)
    assert answer is not None and answer.status_code == 303
    assert answer.headers["location"] == "/evil.example/"


def test_a_new_token_ends_the_old_session(client: TestClient, token_file: Path) -> None:
    client.get("/?token=the-token")
    assert client.get("/api/board").status_code == 200
    write_owner_only(token_file, b"next-token")
    assert client.get("/api/board").status_code == 401
    assert (
        client.get("/api/board", headers={"Authorization": "Bearer next-token"}).status_code == 200
    )


# -- Host, Origin, methods


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": f"127.0.0.1:{PORT}"}, 200),
        ({"Host": f"localhost:{PORT}"}, 200),
        ({"Host": f"evil.example:{PORT}"}, 403),  # a rebound name
        ({"Host": "127.0.0.1:9999"}, 403),  # another port
        ({"Host": "127.0.0.1"}, 403),
        ({"Origin": BASE}, 200),  # its own page
        ({"Origin": f"http://localhost:{PORT}"}, 200),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "http://127.0.0.1:9999"}, 403),  # another loopback page: not its own
        ({"Origin": "null"}, 403),
    ],
)
def test_host_and_origin(client: TestClient, headers: dict[str, str], status: int) -> None:
    answer = client.get("/api/board", headers={**BEARER, **headers})
    assert answer.status_code == status, answer.text
    assert not [h for h in answer.headers if h.lower().startswith("access-control-")]


def test_the_caller_rules_judge_the_connection_port() -> None:
    rules = DashboardCallers()
    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "server": ("127.0.0.1", PORT),
        "headers": [(b"host", f"127.0.0.1:{PORT}".encode()), (b"origin", BASE.encode())],
    }
    assert rules.refusal(scope) is None
    scope["headers"][1] = (b"origin", b"http://127.0.0.1:1")
    refused = rules.refusal(scope)
    assert refused is not None and refused.status_code == 403
    scope["headers"] = [(b"origin", BASE.encode())]  # HTTP/1.1 without Host
    refused = rules.refusal(scope)
    assert refused is not None and refused.status_code == 400


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS", "POST"])
@pytest.mark.parametrize("route", [*ROUTES, "/nowhere"])
def test_every_other_method_is_405(client: TestClient, method: str, route: str) -> None:
    answer = client.request(method, route, headers=BEARER)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "GET"])
def test_the_action_takes_post_only(client: TestClient, method: str) -> None:
    answer = client.request(method, "/api/batches/job/stop", headers=BEARER)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"


def test_stop_needs_the_token_and_the_csrf_token(client: TestClient, plane: StoppingPlane) -> None:
    csrf = client.get("/api/session", headers=BEARER).json()["csrf"]
    assert csrf == csrf_value("the-token")
    assert client.post("/api/batches/job/stop", headers={"X-Nodeau-CSRF": csrf}).status_code == 401
    assert client.post("/api/batches/job/stop", headers=BEARER).status_code == 403
    wrong = {**BEARER, "X-Nodeau-CSRF": "x" * 64}
    assert client.post("/api/batches/job/stop", headers=wrong).status_code == 403
    foreign = {**BEARER, "X-Nodeau-CSRF": csrf, "Origin": "http://evil.example"}
    assert client.post("/api/batches/job/stop", headers=foreign).status_code == 403
    assert plane.stopped == []
    done = client.post("/api/batches/job/stop", headers={**BEARER, "X-Nodeau-CSRF": csrf})
    assert done.status_code == 200
    assert done.json() == {"name": "job", "sentence": "job: stopped; its card is free"}
    assert plane.stopped == ["job"]
    unknown = client.post("/api/batches/nope/stop", headers={**BEARER, "X-Nodeau-CSRF": csrf})
    assert unknown.status_code == 409
    assert unknown.json()["error"]["message"] == "no batch job called 'nope'"


def test_every_answer_keeps_the_page_on_its_own_origin(client: TestClient) -> None:
    answer = client.get("/", headers=BEARER)
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "no-referrer"


# -- the Playground's requests


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ([], "send a JSON object"),
        ({"messages": []}, "messages must be a list of 1 to 64 messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "each message is"),
        ({"messages": [{"role": "user", "content": ""}]}, "a message must be a non-empty string"),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens must be"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "stream": False},
            "unknown field 'stream'",
        ),
    ],
)
def test_a_bad_chat_request_is_one_line(asked: object, message: str) -> None:
    with pytest.raises(playground.PlaygroundError) as refused:
        playground.chat_body(TARGET, asked)
    assert refused.value.one_line().startswith(message)


def test_the_snippets_are_the_request_sent() -> None:
    body = playground.chat_body(
        TARGET, {"messages": [{"role": "user", "content": 'it\'s "quoted"'}], "max_tokens": 8}
    )
    assert body == {
        "model": "chat",
        "messages": [{"role": "user", "content": 'it\'s "quoted"'}],
        "stream": True,
        "max_tokens": 8,
    }
    said = playground.snippets(TARGET, body)

    words = shlex.split(said["curl"].replace("\\\n", " "))
    assert words[:3] == ["curl", "-N", "http://127.0.0.1:4000/v1/chat/completions"]
    assert json.loads(words[words.index("-d") + 1]) == body
    compile(said["python"], "snippet", "exec")  # valid Python
    assert 'base_url="http://127.0.0.1:4000/v1"' in said["python"]
    assert "messages=[{'role': 'user', 'content': 'it\\'s \"quoted\"'}]" in said["python"]
    for task, asked in (
        ("embed", {"input": ["a", "b"]}),
        ("rerank", {"query": "q", "documents": ["a", "b"]}),
    ):
        other = playground.Target(
            name="chat", task=task, model="m", artifact="a", machine=None, gpu=None,
            state="serving", endpoint=TARGET.endpoint,
        )  # fmt: skip
        sent = playground.BODIES[task](other, asked)
        code = playground.snippets(other, sent)
        compile(code["python"], "snippet", "exec")
        curl = shlex.split(code["curl"].replace("\\\n", " "))
        assert curl[1] == TARGET.endpoint + playground.ROUTE_OF[task]
        assert json.loads(curl[curl.index("-d") + 1]) == sent
