"""The endpoint's and the gateway's own counters, served at ``GET /metrics`` in
Prometheus' text format (``prometheus_client``, a registry of this process alone).

Why it is so: docs/adr/decisions/apps-endpoint.md (metrics.py).
"""

from __future__ import annotations

import json
import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import Message, Scope, Send

WORKLOAD = "nodeau.workload"  # the scope key a proxied route sets once its upstream is chosen
NONE = "-"  # the workload label of a request no workload took (refused before the choice)
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
USAGE_BYTES = 1 << 20  # an answer body larger than this is not read for its usage
# the event that ends an OpenAI-compatible stream, after the one before it: raw newlines,
# which no JSON string in an event holds
STREAM_END = b"\n\ndata: [DONE]\n\n"


class Metrics:
    """The counters of one endpoint (or the gateway) process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("workload", "route")
        self.requests = Counter(
            "nodeau_requests",
            "Requests to the proxied routes, by the status code answered.",
            (*labels, "code"),
            registry=self.registry,
        )
        self.first_byte = Histogram(
            "nodeau_time_to_first_byte_seconds",
            "From a request's arrival to its answer's head.",
            labels,
            buckets=SECONDS,
            registry=self.registry,
        )
        self.duration = Histogram(
            "nodeau_request_duration_seconds",
            "From a request's arrival to its answer's last byte.",
            labels,
            buckets=SECONDS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "nodeau_tokens",
            "Tokens the model server reported in usage (prompt, completion).",
            ("workload", "kind"),
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def watching(self, scope: Scope, send: Send) -> Watch:
        """``send``, recording the answer's status, its timing and its usage once."""
        return Watch(self, scope, send)


class Watch:
    """An answer's ``send``, counting the answer once: as the part that ends it is handed on
    (its last part; a stream's ``data: [DONE]`` event, after which an OpenAI client hangs
    up), so a client that has its whole answer finds it counted; else at ``close``, for an
    answer broken off once it began (the client left, the model server stopped)."""

    def __init__(self, metrics: Metrics, scope: Scope, send: Send) -> None:
        self._metrics = metrics
        self._scope = scope
        self._send = send
        self._began = time.perf_counter()
        self._route: str = scope["path"]
        self._status = 0  # none yet: the answer has not begun
        self._streamed = False
        self._usage = b""
        self._tail = b""  # a stream's last bytes, where its end event is looked for
        self._counted = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
            workload = self._scope.get(WORKLOAD, NONE)
            self._metrics.first_byte.labels(workload, self._route).observe(
                time.perf_counter() - self._began
            )
            self._streamed = any(
                name == b"content-type" and value.startswith(b"text/event-stream")
                for name, value in message.get("headers", ())
            )
        elif message["type"] == "http.response.body":
            part: bytes = message.get("body", b"")
            if b'"usage"' in part and len(part) <= USAGE_BYTES:
                self._usage = part
            last = not message.get("more_body", False)
            if self._streamed and not last:
                self._tail = (self._tail + part[-len(STREAM_END) :])[-len(STREAM_END) :]
                last = self._tail == STREAM_END
            if last:
                self.close()  # counted before the part goes, however soon the client asks
        await self._send(message)

    def close(self) -> None:
        """Count the answer, once, if it began."""
        if not self._status or self._counted:
            return
        self._counted = True
        metrics, workload = self._metrics, self._scope.get(WORKLOAD, NONE)
        metrics.requests.labels(workload, self._route, str(self._status)).inc()
        metrics.duration.labels(workload, self._route).observe(time.perf_counter() - self._began)
        if self._usage and 200 <= self._status < 300:
            for kind, count in reported_usage(self._usage, self._streamed).items():
                metrics.tokens.labels(workload, kind).inc(count)


def reported_usage(body: bytes, streamed: bool) -> dict[str, int]:
    """The prompt and completion tokens an answer's ``usage`` reports (a stream's: its last
    event that has one); {} when none reads."""
    if streamed:
        events = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
        found = [e for e in events if b'"usage"' in e]
        if not found:
            return {}
        body = found[-1]
    try:
        usage = json.loads(body).get("usage")
    except (ValueError, AttributeError, RecursionError):
        return {}
    if not isinstance(usage, dict):
        return {}
    counts = {kind: usage.get(f"{kind}_tokens") for kind in ("prompt", "completion")}
    return {
        k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0
    }
