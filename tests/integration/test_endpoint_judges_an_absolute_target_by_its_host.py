"""An absolute-form request (``GET http://host/path HTTP/1.1``) names its host in its target,
which stands for its ``Host``: the endpoint refuses one for another host as the Host rule
refuses other hosts (a JSON 403), whatever its ``Host`` header says, and answers one for
itself."""

from __future__ import annotations

import json

import pytest

from tests.support.real.endpoint import Target, raw_exchange, running_endpoint


@pytest.mark.parametrize(
    "target",
    [
        b"http://other.example/v1/models",
        b"http://other.example:%(port)d/health",
        b"https://127.0.0.1.evil.example/health",
        b"http://user@127.0.0.1:%(port)d/health",
    ],
)
def test_an_absolute_target_for_another_host_is_a_json_403(target: bytes) -> None:
    with running_endpoint(Target()) as url:
        port = int(url.rsplit(":", 1)[1])
        request = b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
        answer = raw_exchange(url, request % (target % {b"port": port}, port))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 ")
    error = json.loads(body)["error"]
    assert error["type"] == "forbidden"
    assert error["message"].startswith("Host ")
    assert (
        f"it answers to Host 127.0.0.1:{port}, localhost:{port} or [::1]:{port}"
        in (error["message"])
    )


def test_an_absolute_target_for_this_endpoint_is_answered() -> None:
    with running_endpoint(Target()) as url:
        port = int(url.rsplit(":", 1)[1])
        request = b"GET http://localhost:%d/health HTTP/1.1\r\nHost: other.example\r\n"
        answer = raw_exchange(url, request % port + b"Connection: close\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert json.loads(body)["status"] == "ok"
