"""Decisions and notes about workloads as core/v1 Events in ``nodeau-system``.

Why it is so: docs/adr/decisions/adapters-kube.md (events.py).
"""

from __future__ import annotations

import json
import threading
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors, send_json
from nodeau.adapters.kube.objects import KINDS, stamp
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.cluster import ClusterError
from nodeau.ports.errors import NodeauError
from nodeau.ports.state import Event
from nodeau.ports.workload_objects import WorkloadObject


class Involved(Protocol):
    """What an Event names of the object it is about (an object as read, either form)."""

    @property
    def kind(self) -> WorkloadKind: ...

    @property
    def uid(self) -> str: ...

    @property
    def version(self) -> str: ...


def record(
    api: Any,
    *,
    workload: str,
    involved: Involved | None,
    reason: str,
    message: str,
    at: datetime,
    identity: str,
    warning: bool = False,
    sending: Sending | None = None,
) -> None:
    """Write one Event about ``workload`` (its object when there is one); handed to
    ``sending`` when given, which writes it beside the caller's work."""
    reference = {"apiVersion": r.API_VERSION, "name": workload, "namespace": r.NAMESPACE}
    if involved is not None:
        reference.update(
            kind=KINDS[involved.kind], uid=involved.uid, resourceVersion=involved.version
        )
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{workload}.{uuid.uuid4().hex[:16]}",
            "namespace": r.NAMESPACE,
            "labels": {r.WORKLOAD_LABEL: workload},
        },
        "involvedObject": reference,
        "type": "Warning" if warning else "Normal",
        "reason": reason,
        "action": reason,
        "message": message,
        "eventTime": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "firstTimestamp": stamp(at),
        "lastTimestamp": stamp(at),
        "count": 1,
        "source": {"component": r.CONTROLLER_COMPONENT},
        "reportingComponent": r.CONTROLLER_COMPONENT,
        "reportingInstance": identity,
    }
    if sending is not None:
        sending.send(workload, body)
    else:
        _post(api, workload, body)


def _post(api: Any, workload: str, body: dict[str, Any]) -> None:
    try:
        with api_errors(f"record an event about {workload}"):
            send_json(
                api,
                "POST",
                "/api/v1/namespaces/{namespace}/events",
                {"namespace": r.NAMESPACE},
                body,
            )
    except Conflict as exc:  # a random 64-bit suffix taken: not a race anyone can lose
        raise ClusterError(f"cannot record an event about {workload}: its name is taken") from exc


class Sending:
    """Events written beside the work that records them, as Kubernetes' own recorder does.

    ``send`` returns at once; the Events go out on ``lanes`` threads, every Event about one
    workload on the same lane, so they are recorded in the order they were sent (a lane's
    thread ends when its lane is empty, and starts again with the next Event). An Event
    that cannot be written is one log line, as a failed recorder's is; a failure that is
    not the cluster's (a bug) is raised by the next ``flush``. ``flush`` waits until every
    Event sent so far is written: the controller flushes at the end of each pass, so a pass
    has written everything it recorded when it ends. Inside ``held()`` Events are queued and
    no lane starts: they go out when the last hold ends (the controller holds them while it
    decides, docs/adr/0018), so a flush inside a hold waits only for those not held."""

    def __init__(self, api: Any, *, lanes: int, log: Callable[[str], None]) -> None:
        if lanes < 1:
            raise ValueError(f"Events are sent on at least one lane, not {lanes}")
        self._api = api
        self._log = log
        self._lanes: list[deque[tuple[str, dict[str, Any]]]] = [deque() for _ in range(lanes)]
        self._busy = [False] * lanes
        self._changed = threading.Condition()
        self._failed: BaseException | None = None
        self._holds = 0  # holds open: while any is, no lane starts

    def send(self, workload: str, body: dict[str, Any]) -> None:
        lane = zlib.crc32(workload.encode()) % len(self._lanes)
        with self._changed:
            self._lanes[lane].append((workload, body))
            if self._busy[lane] or self._holds:
                return
            self._busy[lane] = True
        self._start(lane)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Events sent inside go out once it ends (and every other hold has)."""
        with self._changed:
            self._holds += 1
        try:
            yield
        finally:
            with self._changed:
                self._holds -= 1
                idle = [] if self._holds else [
                    lane for lane, queued in enumerate(self._lanes)
                    if queued and not self._busy[lane]
                ]  # fmt: skip
                for lane in idle:
                    self._busy[lane] = True
            for lane in idle:
                self._start(lane)

    def _start(self, lane: int) -> None:
        threading.Thread(
            target=self._drain, args=(lane,), name=f"events-{lane}", daemon=True
        ).start()

    def flush(self) -> None:
        """Wait until every Event sent so far is written (or said not to be)."""
        with self._changed:
            self._changed.wait_for(lambda: not any(self._busy))
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _drain(self, lane: int) -> None:
        while True:
            with self._changed:
                if not self._lanes[lane]:
                    self._busy[lane] = False
                    self._changed.notify_all()
                    return
                workload, body = self._lanes[lane].popleft()
            try:
                _post(self._api, workload, body)
            except NodeauError as exc:
                self._log(f"an Event about {workload} was not recorded: {exc.one_line()}")
            except BaseException as exc:  # not the cluster's: raised where the work is
                with self._changed:
                    self._failed = self._failed or exc


def read(api: Any, workload: str | None = None) -> tuple[Event, ...]:
    """Events about workloads (about one when ``workload`` is given), in the order recorded."""
    selector = f"involvedObject.apiVersion={r.API_VERSION}"
    if workload is not None:
        selector += f",involvedObject.name={workload}"
    core: Any = client.CoreV1Api(api)
    with api_errors("read events"):
        response = core.list_namespaced_event(
            r.NAMESPACE,
            field_selector=selector,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        items = json.loads(response.data)["items"]
    items.sort(key=_recorded)
    return tuple(
        Event(at=_moment(i), workload=i["involvedObject"]["name"], text=i.get("message") or "")
        for i in items
    )


def _recorded(item: dict[str, Any]) -> int:
    return int(item["metadata"]["resourceVersion"])


def _moment(item: dict[str, Any]) -> datetime:
    """When it happened: eventTime, else the last timestamp, else when it was created."""
    text = item.get("eventTime") or item.get("lastTimestamp")
    text = text or item["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(text)


class KubeEventLog:
    """``ports.cluster.EventLog`` as core/v1 Events in ``nodeau-system`` (``sending``: written
    beside the caller's work, the controller's; None: each one before ``record`` returns)."""

    def __init__(self, api: Any, *, identity: str, sending: Sending | None = None) -> None:
        self._api = api
        self._identity = identity
        self._sending = sending

    def flush(self) -> None:
        """Every Event recorded so far and not held is written (or said not to be)."""
        if self._sending is not None:
            self._sending.flush()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Events recorded inside are written once it ends (at once when not ``sending``:
        each is written before ``record`` returns)."""
        if self._sending is None:
            yield
            return
        with self._sending.held():
            yield

    def record(
        self,
        about: WorkloadObject,
        reason: str,
        message: str,
        at: datetime,
        *,
        warning: bool = False,
    ) -> None:
        """One Event about the object (component nodeau-controller, this identity)."""
        record(
            self._api,
            workload=about.name,
            involved=about,
            reason=reason,
            message=message,
            at=at,
            identity=self._identity,
            warning=warning,
            sending=self._sending,
        )
