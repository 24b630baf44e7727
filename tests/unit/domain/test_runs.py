"""What ``nodeau run`` does with a name (domain/runs.py): the names it makes from a model's
name at their edges (253 characters, separators at either end), the sentence that says why
a name is refused, and each sentence of a name already taken, written out whole."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nodeau.domain.runs import (
    Admit,
    EndpointBack,
    NameTaken,
    name_from_model,
    name_problem,
    run_step,
)
from nodeau.domain.workloads import Workload, WorkloadKind, WorkloadState

S = WorkloadState
ARTIFACT = "9f2c3b1a7d6e5f40aa"  # longer than the 12 characters a sentence shows


def workload(**changes: Any) -> Workload:
    fields: dict[str, Any] = {
        "name": "tiny",
        "kind": WorkloadKind.SERVICE,
        "model": "smollm2",
        "artifact_id": ARTIFACT,
        "machine": "m1",
        "gpu_uuid": "GPU-1",
        "state": S.SERVING,
        "since": datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
    }
    fields.update(changes)
    return Workload(**fields)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("SmolLM2 135M_Instruct", "smollm2-135m-instruct"),
        ("__Qwen2.5__", "qwen2.5"),
        ("a" * 300, "a" * 253),
        # a separator before the name moves nothing: 253 letters are kept
        ("_" + "a" * 253, "a" * 253),
        # the 253rd character is a separator: it is cut off, not kept at the end
        ("a" * 252 + "_bc", "a" * 252),
        ("a" * 251 + ".-x", "a" * 251),
    ],
)
def test_a_name_made_from_a_model_name_is_a_valid_name(model: str, name: str) -> None:
    assert name_from_model(model) == name
    assert name_problem(name) is None


@pytest.mark.parametrize("model", ["___", "", "-.-", "日本語"])
def test_nothing_left_of_a_model_name_makes_no_name(model: str) -> None:
    assert name_from_model(model) is None


def test_a_refused_name_says_the_rule() -> None:
    assert name_problem("Tiny_1") == (
        "'Tiny_1': use lower-case letters, digits, '-' and '.', "
        "starting and ending with a letter or digit (at most 253 characters)"
    )
    assert name_problem("a" * 254) is not None
    assert name_problem("a" * 253) is None


@pytest.mark.parametrize("state", [S.SUCCEEDED, S.FAILED, S.STOPPED])
def test_a_name_whose_workload_finished_is_free_again(state: WorkloadState) -> None:
    assert run_step(workload(state=state), artifact_id=ARTIFACT) == Admit()
    assert run_step(None, artifact_id=ARTIFACT) == Admit()


def test_a_batch_job_holding_the_name_is_named_with_how_to_stop_it() -> None:
    job = workload(name="nightly", kind=WorkloadKind.BATCH, state=S.RUNNING)
    assert run_step(job, artifact_id=ARTIFACT) == NameTaken(
        sentence="nightly is a batch job holding a card; give another --name "
        "or stop it with nodeau batch stop nightly"
    )


def test_a_name_serving_another_artifact_names_its_model_and_artifact() -> None:
    assert run_step(workload(), artifact_id="other") == NameTaken(
        sentence="tiny already serves smollm2 (9f2c3b1a7d6e); "
        "give another --name or stop it with nodeau stop tiny --workload"
    )


@pytest.mark.parametrize("state", [S.ADMITTED, S.STARTING])
def test_a_name_not_serving_yet_is_taken_until_it_serves(state: WorkloadState) -> None:
    assert run_step(workload(state=state), artifact_id=ARTIFACT) == NameTaken(
        sentence=f"tiny is {state.value}, not serving yet; nodeau ps shows when "
        "it serves, or stop it with nodeau stop tiny --workload"
    )


def test_the_same_artifact_serving_brings_its_endpoint_back() -> None:
    w = workload()
    assert run_step(w, artifact_id=ARTIFACT) == EndpointBack(workload=w)
