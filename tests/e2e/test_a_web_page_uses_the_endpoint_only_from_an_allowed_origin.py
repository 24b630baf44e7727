"""A web page in Debian's chromium reads the endpoint from an allowed origin, and only then.

Loopback and allowed-origin pages read the answer (preflight and openai SDK headers); a page of
another origin gets "Failed to fetch" and its request never reaches the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.support.real.browser import Page, chromium
from tests.support.real.endpoint import Target, running_endpoint, upstream_at
from tests.support.real.upstream import (
    MinimalUpstream,
    loopback_socket,
    running_upstream,
    serving,
    upstream_config,
)

pytestmark = pytest.mark.slow

PAGE = "<!doctype html><html><head><title>a page</title></head><body>a page</body></html>"
ASK = """
fetch(%s, {
  method: "POST",
  headers: {"Content-Type": "application/json", "Authorization": "Bearer unused",
            "X-Stainless-Lang": "js", "X-Stainless-Retry-Count": "0"},
  body: JSON.stringify({model: "tiny", messages: [{role: "user", content: "hi"}]}),
}).then(async (r) => JSON.stringify({status: r.status, body: await r.json()}),
        (e) => JSON.stringify({failed: e.name + ": " + e.message}))
"""


@pytest.fixture(scope="module")
def pages() -> Iterator[int]:
    """A server of one page on a free loopback port; yields the port."""
    sock = loopback_socket()
    app = Starlette(routes=[Route("/", lambda request: HTMLResponse(PAGE))])
    with serving(uvicorn.Server(upstream_config(app)), sock):
        yield sock.getsockname()[1]


@pytest.fixture(scope="module")
def browser() -> Iterator[Callable[[], Page]]:
    rules = "--host-resolver-rules=MAP app.example 127.0.0.1, MAP evil.example 127.0.0.1"
    with chromium(extra_args=[rules]) as new_page:
        yield new_page


def asked_from(browser: Callable[[], Page], page_url: str, endpoint: str) -> dict[str, object]:
    page = browser()
    page.open(page_url)
    answer: dict[str, object] = json.loads(
        page.evaluate(ASK % json.dumps(f"{endpoint}/v1/chat/completions"))
    )
    return answer


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "app.example"])
def test_a_page_of_an_allowed_origin_reads_a_chat_completion(
    pages: int, browser: Callable[[], Page], host: str
) -> None:
    upstream = MinimalUpstream(model="tiny", chunk_delay_s=0.0)
    allowed = (f"http://app.example:{pages}",)
    with (
        running_upstream(upstream) as base,
        running_endpoint(Target(upstream_at(base)), allowed_origins=allowed) as endpoint,
    ):
        answer = asked_from(browser, f"http://{host}:{pages}/", endpoint)
    assert answer["status"] == 200, answer
    assert answer["body"]["choices"][0]["message"]["content"] == "echo: hi"  # type: ignore[index]
    assert upstream.arrived == ["POST /v1/chat/completions"], "its preflight never went upstream"


@pytest.mark.parametrize("host", ["evil.example", "app.example"])
def test_a_page_of_another_origin_cannot_fetch_and_reaches_nothing(
    pages: int, browser: Callable[[], Page], host: str
) -> None:
    upstream = MinimalUpstream(model="tiny", chunk_delay_s=0.0)
    with (
        running_upstream(upstream) as base,
        running_endpoint(Target(upstream_at(base))) as endpoint,  # app.example not allowed here
    ):
        answer = asked_from(browser, f"http://{host}:{pages}/", endpoint)
    assert answer == {"failed": "TypeError: Failed to fetch"}
    assert upstream.arrived == [], "the refused preflight kept the request from being sent"
