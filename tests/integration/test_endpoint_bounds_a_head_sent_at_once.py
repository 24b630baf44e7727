"""A request head over the endpoint's bound that arrives at once (one write, one read on the
server's side, body and all) is a 431 as one sent in pieces is: it is measured once whole."""

from __future__ import annotations

import json

from nodeau.apps.endpoint.request_head import MAX_HEAD_BYTES
from tests.support.real.endpoint import Target, raw_exchange, running_endpoint


def test_a_head_past_the_bound_sent_in_one_write_is_a_431() -> None:
    with running_endpoint(Target()) as url:
        port = int(url.rsplit(":", 1)[1])
        head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: %s\r\n\r\n" % (
            port,
            b"v" * (2 * MAX_HEAD_BYTES),
        )
        answer = raw_exchange(url, head)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert json.loads(body)["error"]["type"] == "request_too_large"
