"""The controller's write fence on a real API server: a write is sent only while leading,
and one that answers later than the leadership it was fenced with is said in the log.

The clock is the test's: one "second" passes while each request is out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.lease import FencedApiClient, field_manager
from nodeau.ports.leader_lease import NotLeading


class Ticks:
    """A monotonic clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def fenced(kube: Any, left: float | None, said: list[str]) -> Any:
    def fence() -> float:
        if left is None:
            raise NotLeading("controller c1 does not lead: it writes nothing")
        return left

    return FencedApiClient(kube.configuration, fence, field_manager("c1"), said.append, Ticks())


def make_map(api: Any, name: str) -> None:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"a": "b"})
    client.CoreV1Api(api).create_namespaced_config_map(r.NAMESPACE, body)


def exists(kube: Any, name: str) -> bool:
    names = {m.metadata.name for m in client.CoreV1Api(kube).list_namespaced_config_map(
        r.NAMESPACE).items}  # fmt: skip
    return name in names


def test_a_write_answered_after_the_leadership_left_is_said(fresh_fleet: Any) -> None:
    said: list[str] = []
    make_map(fenced(fresh_fleet, 0.5, said), "late")
    assert exists(fresh_fleet, "late")
    assert len(said) == 1, said
    line = said[0]
    assert f"POST /api/v1/namespaces/{r.NAMESPACE}/configmaps," in line
    assert "answered 1.0 s later with 0.5 s of leadership left" in line
    assert "may have landed after the Lease changed hands" in line


def test_a_write_answered_in_time_says_nothing(fresh_fleet: Any) -> None:
    said: list[str] = []
    api = fenced(fresh_fleet, 5.0, said)
    make_map(api, "in-time")
    client.CoreV1Api(api).list_namespaced_config_map(r.NAMESPACE)  # a read is not fenced
    assert exists(fresh_fleet, "in-time")
    assert said == []


@pytest.mark.parametrize("write", ["create", "delete"])
def test_a_controller_that_does_not_lead_sends_nothing(fresh_fleet: Any, write: str) -> None:
    make_map(fresh_fleet, "kept")
    said: list[str] = []
    api = fenced(fresh_fleet, None, said)
    send: Callable[[], object] = (
        (lambda: make_map(api, "never"))
        if write == "create"
        else (lambda: client.CoreV1Api(api).delete_namespaced_config_map("kept", r.NAMESPACE))
    )
    with pytest.raises(NotLeading):
        send()
    assert not exists(fresh_fleet, "never")
    assert exists(fresh_fleet, "kept")
    assert said == []
