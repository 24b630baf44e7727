"""A batch worker's requests to one model server, over HTTP on its loopback address.

Why it is so: docs/adr/decisions/adapters.md (batch_sender.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from nodeau.domain.batches import BatchRequest, BatchResult

REQUEST_TIMEOUT_S = 600.0  # one request's whole answer; a long completion takes minutes
HEALTH_TIMEOUT_S = 5.0


class HttpBatchSender:
    """``ports.batches.BatchSender`` over httpx, with the server's key in every request."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._client = httpx.Client(
            base_url=base_url, headers=dict(headers or {}), trust_env=False, timeout=timeout_s
        )

    def send(self, job: str, request: BatchRequest) -> BatchResult:
        rid = f"batch_req_{job}_{request.line_no}"
        try:
            answer = self._client.post(request.url, json=dict(request.body))
        except httpx.HTTPError as exc:
            return BatchResult(
                id=rid, custom_id=request.custom_id, status_code=None, body=None, error=str(exc)
            )
        try:
            body = answer.json()
        except ValueError:
            body = answer.text
        code = answer.status_code
        error = None if code < 400 else f"the model server answered {code}"
        return BatchResult(
            id=rid, custom_id=request.custom_id, status_code=code, body=body, error=error
        )

    def answering(self) -> bool:
        try:
            return self._client.get("/health", timeout=HEALTH_TIMEOUT_S).status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._client.close()
