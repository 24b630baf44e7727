"""A GPUService's route names its model as asked and as admitted, and its artifact id.

``route_of`` reads them from the object the controller wrote (``spec.model`` and the record
in ``status.record``), so the fleet's endpoint refuses another model as one machine's does;
an object not admitted yet, or with a record it cannot read, names its spec's model only.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodeau.adapters.kube.routes import route_of

ARTIFACT = "ab" * 32


def body(spec_model: str, record: object) -> dict[str, Any]:
    status: dict[str, Any] = {"state": "serving", "endpoint": "http://10.0.0.7:8080/v1"}
    if record is not None:
        status["record"] = record
    return {
        "metadata": {"name": "chatbot", "creationTimestamp": "2026-12-02T10:00:00Z"},
        "spec": {"model": spec_model, "task": "chat"},
        "status": status,
    }


def test_an_admitted_service_names_its_spec_model_its_record_names_and_its_artifact() -> None:
    record = {"workload": {"model": "qwen", "artifact_id": ARTIFACT, "names": ["qwen", "qwen-q8"]}}
    route = route_of(body("qwen-q8", record))
    assert route.names == ("qwen-q8", "qwen")
    assert route.artifact_id == ARTIFACT
    assert route.base_url == "http://10.0.0.7:8080"


@pytest.mark.parametrize(
    "record",
    [None, "not a mapping", {"workload": "x"}, {"workload": {"names": 7, "artifact_id": 7}}],
)
def test_a_service_without_a_readable_record_names_its_spec_model_only(record: object) -> None:
    route = route_of(body("qwen", record))
    assert (route.names, route.artifact_id) == (("qwen",), "")
