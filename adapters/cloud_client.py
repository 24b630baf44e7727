"""``NodeauCloud`` over httpx: Nodeau Cloud's API, reached from here and only from here.

Why it is so: docs/adr/decisions/adapters.md (cloud_client.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

import cattrs
import httpx
from attrs import frozen
from cattrs.errors import BaseValidationError

from nodeau.domain.cloud import (
    Association,
    CallPurpose,
    OperationRecord,
    OutboundCall,
    RemoteOperation,
    SignInState,
)
from nodeau.ports.cloud import (
    CloudRefused,
    CloudUnavailable,
    DeviceCode,
    Installation,
    SignInPoll,
)

MAX_ANSWER = 1024 * 1024  # an answer larger than this is not read


@frozen(kw_only=True)
class _DeviceAnswer:
    device_code: str
    user_code: str
    verification_uri: str
    expires_in: int
    interval: int = 5
    verification_uri_complete: str | None = None


@frozen(kw_only=True)
class _Account:
    id: str
    name: str


@frozen(kw_only=True)
class _TokenAnswer:
    access_token: str
    account: _Account
    installation: str
    entitlement: str | None = None


@frozen(kw_only=True)
class _PollError:
    error: str


@frozen(kw_only=True)
class _Operation:
    id: str
    kind: str
    target: str


@frozen(kw_only=True)
class _Operations:
    operations: list[_Operation]


def _exact(kind: type[Any], name: str) -> Callable[[object, object], Any]:
    def structure(value: object, _type: object) -> Any:
        if type(value) is not kind:
            raise ValueError(f"must be {name}, got {type(value).__name__}")
        return value

    return structure


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=False)
    converter.register_structure_hook(str, _exact(str, "text"))
    converter.register_structure_hook(int, _exact(int, "a whole number"))
    return converter


_CONVERTER = _converter()
_A = TypeVar("_A")


def _body(data: Mapping[str, object]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")


class _Unreadable(ValueError):
    """An answer that is not the JSON this call expects; says which field and why."""


def _reader(kind: type[_A]) -> Callable[[int, bytes], _A]:
    def read(_status: int, content: bytes) -> _A:
        try:
            raw = json.loads(content)
        except ValueError:
            raise _Unreadable("not JSON") from None
        try:
            return _CONVERTER.structure(raw, kind)
        except (BaseValidationError, TypeError, ValueError) as exc:
            problems = (
                cattrs.transform_error(exc) if isinstance(exc, BaseValidationError) else [str(exc)]
            )
            raise _Unreadable("; ".join(problems)) from None

    return read


def _poll_reader(status: int, content: bytes) -> _TokenAnswer | _PollError:
    if status == 400:
        return _reader(_PollError)(status, content)
    return _reader(_TokenAnswer)(status, content)


def _nothing(_status: int, _content: bytes) -> None:
    return None


class HttpxNodeauCloud:
    """``NodeauCloud`` at ``base_url``; every call is handed to ``record``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        record: Callable[[OutboundCall], None],
        clock: Callable[[], datetime],
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._timeout_s = timeout_s
        self._record = record
        self._clock = clock
        self._client = httpx.Client(timeout=timeout_s, follow_redirects=False, transport=transport)

    def close(self) -> None:
        self._client.close()

    # -- the calls ---------------------------------------------------------------------

    def start_sign_in(self, installation: Installation) -> DeviceCode:
        body = {
            "installation": installation.installation_id,
            "machine": installation.machine,
            "plane": installation.plane,
            "version": installation.version,
        }
        answer = self._call(
            CallPurpose.SIGN_IN, "POST", "/v1/device/code", body, read=_reader(_DeviceAnswer)
        )
        return DeviceCode(
            device_code=answer.device_code,
            user_code=answer.user_code,
            verification_uri=answer.verification_uri,
            verification_uri_complete=answer.verification_uri_complete,
            expires_in=timedelta(seconds=max(answer.expires_in, 0)),
            interval=timedelta(seconds=max(answer.interval, 0)),
        )

    def poll_sign_in(self, code: DeviceCode) -> SignInPoll:
        body = {"device_code": code.device_code}
        answer = self._call(
            CallPurpose.SIGN_IN_POLL,
            "POST",
            "/v1/device/token",
            body,
            answers_400=True,
            read=_poll_reader,
        )
        if isinstance(answer, _PollError):
            try:
                state = SignInState(answer.error)
            except ValueError:
                raise CloudRefused(
                    f"Nodeau Cloud at {self._base} refused the sign-in: {answer.error}"
                ) from None
            if state is SignInState.APPROVED:
                raise CloudRefused(f"Nodeau Cloud at {self._base}: a 400 cannot approve")
            return SignInPoll(state=state)
        return SignInPoll(
            state=SignInState.APPROVED,
            account=answer.account.name,
            installation_id=answer.installation,
            token=answer.access_token,
            entitlement=None if answer.entitlement is None else answer.entitlement.encode(),
        )

    def send_report(self, association: Association, report: Mapping[str, object]) -> None:
        path = f"/v1/installations/{association.installation_id}/reports"
        self._call(CallPurpose.REPORT, "POST", path, report, token=association.token, read=_nothing)

    def operations(self, association: Association) -> tuple[RemoteOperation, ...]:
        path = f"/v1/installations/{association.installation_id}/operations"
        answer = self._call(
            CallPurpose.OPERATIONS,
            "GET",
            path,
            None,
            token=association.token,
            read=_reader(_Operations),
        )
        return tuple(
            RemoteOperation(id=o.id, kind=o.kind, target=o.target) for o in answer.operations
        )

    def send_outcome(self, association: Association, record: OperationRecord) -> None:
        path = f"/v1/installations/{association.installation_id}/operations/{record.id}"
        body = {
            "outcome": record.outcome,
            "verdict": record.verdict.value,
            "sentence": record.sentence,
        }
        self._call(CallPurpose.OUTCOME, "POST", path, body, token=association.token, read=_nothing)

    def disconnect(self, association: Association) -> None:
        path = f"/v1/installations/{association.installation_id}/disconnect"
        self._call(CallPurpose.DISCONNECT, "POST", path, {}, token=association.token, read=_nothing)

    # -- one call, recorded ------------------------------------------------------------

    def _call(
        self,
        purpose: CallPurpose,
        method: str,
        path: str,
        data: Mapping[str, object] | None,
        *,
        token: str | None = None,
        answers_400: bool = False,
        read: Callable[[int, bytes], _A],
    ) -> _A:
        url = f"{self._base}{path}"
        body = b"" if data is None else _body(data)
        headers = {"accept": "application/json"}
        if data is not None:
            headers["content-type"] = "application/json"
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        at = self._clock()

        def record(sent: int, received: int, status: int | None, failure: str | None) -> None:
            self._record(
                OutboundCall(
                    at=at,
                    method=method,
                    url=url,
                    purpose=purpose,
                    bytes_sent=sent,
                    bytes_received=received,
                    status=status,
                    failure=failure,
                )
            )

        try:
            with self._client.stream(method, url, content=body or None, headers=headers) as r:
                content = b""
                for chunk in r.iter_bytes():
                    content += chunk
                    if len(content) > MAX_ANSWER:
                        break
        except httpx.TimeoutException as exc:
            sent = 0 if isinstance(exc, httpx.ConnectTimeout) else len(body)
            why = f"timed out after {self._timeout_s:g} s"
            record(sent, 0, None, why)
            raise CloudUnavailable(f"Nodeau Cloud at {self._base}: {purpose.value}: {why}") from exc
        except httpx.HTTPError as exc:
            sent = 0 if isinstance(exc, httpx.ConnectError) else len(body)
            why = f"no answer ({type(exc).__name__}: {exc})"
            record(sent, 0, None, why)
            raise CloudUnavailable(f"Nodeau Cloud at {self._base}: {purpose.value}: {why}") from exc
        status = r.status_code
        if len(content) > MAX_ANSWER:
            record(len(body), len(content), status, f"an answer over {MAX_ANSWER} bytes")
            raise CloudUnavailable(f"Nodeau Cloud at {self._base}: {purpose.value}: too large")
        if status >= 500 or 300 <= status < 400:
            why = f"answered {status}"
            record(len(body), len(content), status, why)
            raise CloudUnavailable(f"Nodeau Cloud at {self._base}: {purpose.value}: {why}")
        if status >= 400 and not (answers_400 and status == 400):
            why = f"refused ({status})"
            record(len(body), len(content), status, why)
            raise CloudRefused(f"Nodeau Cloud at {self._base}: {purpose.value}: {why}")
        try:
            value = read(status, content)
        except _Unreadable as exc:
            why = f"an answer that could not be read ({exc})"
            record(len(body), len(content), status, why)
            raise CloudUnavailable(f"Nodeau Cloud at {self._base}: {purpose.value}: {why}") from exc
        record(len(body), len(content), status, None)
        return value
