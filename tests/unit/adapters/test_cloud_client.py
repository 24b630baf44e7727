"""The httpx adapter's mapping of answers: each call recorded with its sizes, an unreadable
answer or a redirect is a failure, a 4xx is a refusal, the sign-in poll's 400s are answers.
(Real sockets, an outage and timeouts: tests/integration/test_cloud.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from nodeau.adapters.cloud_client import HttpxNodeauCloud
from nodeau.domain.cloud import Association, OperationKind, OutboundCall, SignInState
from nodeau.ports.cloud import CloudRefused, CloudUnavailable, DeviceCode, Installation

T0 = datetime(2026, 12, 1, tzinfo=UTC)
BASE = "https://cloud.example"
ASSOCIATION = Association(
    base_url=BASE,
    account="a",
    installation_id="inst-1",
    token="tok",
    connected_at=T0,
    fleet=True,
    allowed=frozenset({OperationKind.DRAIN}),
)
CODE = DeviceCode(
    device_code="dc",
    user_code="U",
    verification_uri=f"{BASE}/device",
    verification_uri_complete=None,
    expires_in=timedelta(minutes=10),
    interval=timedelta(seconds=5),
)


def cloud(
    answer: Callable[[httpx.Request], httpx.Response],
) -> tuple[HttpxNodeauCloud, list[OutboundCall]]:
    calls: list[OutboundCall] = []
    client = HttpxNodeauCloud(
        BASE,
        timeout_s=1,
        record=calls.append,
        clock=lambda: T0,
        transport=httpx.MockTransport(answer),
    )
    return client, calls


def test_a_report_is_sent_with_its_credential_and_recorded_with_its_sizes() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    client, calls = cloud(answer)
    client.send_report(ASSOCIATION, {"installation": "inst-1", "machines": []})
    [request] = seen
    assert request.url == f"{BASE}/v1/installations/inst-1/reports"
    assert request.headers["authorization"] == "Bearer tok"
    assert json.loads(request.content) == {"installation": "inst-1", "machines": []}
    [call] = calls
    assert (call.purpose.value, call.status, call.failure) == ("report", 204, None)
    assert (call.bytes_sent, call.bytes_received) == (len(request.content), 0)


@pytest.mark.parametrize(
    ("status", "body", "error", "failure"),
    [
        (200, b"not json", CloudUnavailable, "an answer that could not be read (not JSON)"),
        (200, b'{"operations": [{"id": 1}]}', CloudUnavailable, "an answer that could not be read"),
        (302, b"", CloudUnavailable, "answered 302"),
        (500, b"{}", CloudUnavailable, "answered 500"),
        (503, b"", CloudUnavailable, "answered 503"),
        (401, b"{}", CloudRefused, "refused (401)"),
        (404, b"{}", CloudRefused, "refused (404)"),
    ],
)
def test_an_answer_that_is_not_a_good_one_fails_the_call_and_is_recorded(
    status: int, body: bytes, error: type[Exception], failure: str
) -> None:
    client, calls = cloud(lambda _: httpx.Response(status, content=body))
    with pytest.raises(error):
        client.operations(ASSOCIATION)
    [call] = calls
    assert call.status == status and call.failure is not None
    assert call.failure.startswith(failure)
    assert call.bytes_received == len(body)


@pytest.mark.parametrize(
    "state", [SignInState.PENDING, SignInState.SLOW_DOWN, SignInState.DENIED, SignInState.EXPIRED]
)
def test_the_sign_in_polls_400s_are_answers(state: SignInState) -> None:
    client, calls = cloud(lambda _: httpx.Response(400, json={"error": state.value}))
    assert client.poll_sign_in(CODE).state is state
    assert calls[0].failure is None


def test_an_unknown_poll_error_is_a_refusal() -> None:
    client, _ = cloud(lambda _: httpx.Response(400, json={"error": "invalid_client"}))
    with pytest.raises(CloudRefused, match="refused the sign-in: invalid_client"):
        client.poll_sign_in(CODE)


def test_an_approved_sign_in_gives_the_account_credential_and_entitlement() -> None:
    answer = {
        "access_token": "tok",
        "account": {"id": "acct", "name": "Org"},
        "installation": "inst-1",
        "entitlement": '{"format":1}',
        "something_new": True,  # a field this version does not know is ignored
    }
    client, _ = cloud(lambda _: httpx.Response(200, json=answer))
    poll = client.poll_sign_in(CODE)
    assert (poll.state, poll.account, poll.installation_id, poll.token) == (
        SignInState.APPROVED,
        "Org",
        "inst-1",
        "tok",
    )
    assert poll.entitlement == b'{"format":1}'


def test_sign_in_sends_only_what_identifies_the_installation() -> None:
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(
            200,
            json={"device_code": "d", "user_code": "U", "verification_uri": "v", "expires_in": 60},
        )

    client, _ = cloud(answer)
    code = client.start_sign_in(
        Installation(installation_id="inst-1", machine="box", plane="machine", version="0.1.0")
    )
    assert json.loads(seen[0]) == {
        "installation": "inst-1",
        "machine": "box",
        "plane": "machine",
        "version": "0.1.0",
    }
    assert code.interval == timedelta(seconds=5)  # RFC 8628's default when none is given
