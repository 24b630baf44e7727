"""The dashboard's Traffic table (apps/dashboard/traffic.py) reads what an endpoint's own
``/metrics`` counted: requests, failures, mean time to the end, completion tokens and
their rate, per workload; an endpoint that did not answer is said, never shown as zero."""

from __future__ import annotations

from prometheus_client import generate_latest

from nodeau.apps.dashboard.traffic import Traffic, row, totals
from nodeau.apps.endpoint.metrics import Metrics


def counted() -> bytes:
    metrics = Metrics()
    for workload, code, seconds in (
        ("chat", "200", 0.5),
        ("chat", "200", 1.5),
        ("chat", "503", 0.0),
    ):
        metrics.requests.labels(workload, "/v1/chat/completions", code).inc()
        metrics.duration.labels(workload, "/v1/chat/completions").observe(seconds)
    metrics.requests.labels("other", "/v1/embeddings", "200").inc()
    metrics.tokens.labels("chat", "completion").inc(40)
    metrics.tokens.labels("chat", "prompt").inc(7)
    return generate_latest(metrics.registry)


def test_one_workloads_totals_leave_out_the_others() -> None:
    chat = totals("chat", counted().decode())
    assert chat == Traffic(name="chat", requests=3, failed=1, answering_s=2.0, completion_tokens=40)
    assert row(chat) == ["chat", "3", "1", "667 ms", "40", "20.0"]
    assert totals("other", counted().decode()).requests == 1


def test_an_endpoint_that_did_not_answer_is_said_not_zero() -> None:
    silent = Traffic(
        name="chat", requests=None, failed=None, answering_s=None, completion_tokens=None
    )
    assert row(silent)[1] == "no answer from its endpoint"


def test_nothing_served_yet_has_no_rate_and_no_mean() -> None:
    assert row(totals("chat", "")) == ["chat", "0", "0", "-", "0", "-"]
