"""What each serving workload's endpoint says it served, for the dashboard: totals of its
own ``GET /metrics`` (``nodeau.apps.endpoint.metrics``), read at each refresh.

Why it is so: docs/adr/decisions/apps-dashboard.md (traffic.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen
from prometheus_client.parser import text_string_to_metric_families

from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.ports.endpoints import MetricsTexts

HEADERS = ("NAME", "REQUESTS", "FAILED", "MEAN TIME", "COMPLETION TOKENS", "TOKENS/S")


@frozen(kw_only=True)
class Traffic:
    """One endpoint's totals for its workload; None where it did not answer."""

    name: str
    requests: int | None
    failed: int | None
    answering_s: float | None  # the sum of every request's time to its end
    completion_tokens: int | None


def read_traffic(workloads: Sequence[WorkloadView], texts: MetricsTexts) -> tuple[Traffic, ...]:
    """The totals of every serving service whose endpoint is on this machine."""
    served = [w for w in workloads if w.kind == "service" and w.endpoint and w.state == "serving"]
    said = texts([str(w.endpoint) for w in served])
    return tuple(_traffic(w.name, text) for w, text in zip(served, said, strict=True))


def _traffic(name: str, text: str | None) -> Traffic:
    try:
        if text is not None:
            return totals(name, text)
    except ValueError:
        pass  # not a metrics text: said as no answer, as a silent endpoint is
    return Traffic(name=name, requests=None, failed=None, answering_s=None, completion_tokens=None)


def totals(name: str, exposition: str) -> Traffic:
    """The totals of workload ``name`` in an endpoint's ``/metrics`` text."""
    requests = failed = tokens = 0
    answering = 0.0
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            if s.labels.get("workload") != name:
                continue
            if s.name == "nodeau_requests_total":
                requests += int(s.value)
                failed += int(s.value) if s.labels.get("code", "")[:1] in ("4", "5") else 0
            elif s.name == "nodeau_request_duration_seconds_sum":
                answering += s.value
            elif s.name == "nodeau_tokens_total" and s.labels.get("kind") == "completion":
                tokens += int(s.value)
    return Traffic(
        name=name, requests=requests, failed=failed, answering_s=answering, completion_tokens=tokens
    )


def row(t: Traffic) -> list[str]:
    """``t`` as the page's table row."""
    if t.requests is None:
        return [t.name, "no answer from its endpoint", "-", "-", "-", "-"]
    mean = f"{t.answering_s / t.requests * 1000:.0f} ms" if t.requests and t.answering_s else "-"
    rate = (
        f"{t.completion_tokens / t.answering_s:.1f}"
        if t.completion_tokens and t.answering_s
        else "-"
    )
    return [t.name, str(t.requests), str(t.failed), mean, str(t.completion_tokens), rate]
