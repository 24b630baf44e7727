"""A value no plane could have recorded is refused with a sentence that says why, written
out here whole: copy requests, artifacts, cached files, qualification evidence, and the
lines of a batch file. Taking back one ask keeps every other request, wherever it sits."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from nodeau.domain.artifacts import Artifact, ArtifactFile, Origin, Sha256
from nodeau.domain.batches import BatchRequest, LineProblem, parse_batch_line
from nodeau.domain.cache import CachedFile
from nodeau.domain.copies import Ask, CopyRequest, without_ask
from nodeau.domain.qualification import QualificationEvidence

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ART = "ab" * 32
SHA = Sha256.of_bytes(b"model")


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def copy_request(**changes: Any) -> CopyRequest:
    fields: dict[str, Any] = {
        "machine": "attic",
        "artifact": ART,
        "name": "qwen",
        "since": T0,
        "askers": (Ask(asker="person", at=T0),),
    }
    fields.update(changes)
    return CopyRequest(**fields)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"machine": " "}, "machine must not be blank"),
        ({"name": ""}, "name must not be blank"),
        (
            {"artifact": "AB" * 32},
            f"artifact is an artifact id (64 lowercase hex), got {'AB' * 32!r}",
        ),
        ({"askers": ()}, "a copy request is held by at least one asker"),
    ],
)
def test_a_copy_request_no_one_could_make_is_refused_saying_why(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        copy_request(**changes)


def test_taking_back_an_ask_keeps_every_request_after_one_it_does_not_touch() -> None:
    other = "cd" * 32
    first = copy_request(machine="attic", artifact=ART)
    second = copy_request(machine="attic", artifact=other)
    third = copy_request(machine="garage", artifact=ART)
    assert without_ask([first, second, third], machine="attic", artifact=other, asker="person") == (
        first,
        third,
    )
    assert without_ask([first, second, third], machine="garage", artifact=ART, asker="person") == (
        first,
        second,
    )


def test_an_artifact_needs_a_source() -> None:
    files = (ArtifactFile(path="m.gguf", size_bytes=5, sha256=SHA),)
    good = Artifact.of_files(files, origin=Origin.CUSTOM, source="import")
    with pytest.raises(ValueError, match=exactly("an artifact needs a source")):
        Artifact(id=good.id, origin=Origin.CUSTOM, files=files, source="  ")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"machine": " "}, "a cached file belongs to a named machine"),
        ({"computed_sha256": SHA}, "a computed hash and the moment it was computed come together"),
        ({"verified_at": T0}, "a computed hash and the moment it was computed come together"),
    ],
)
def test_a_cached_file_no_machine_could_report_is_refused_saying_why(
    changes: dict[str, Any], message: str
) -> None:
    fields: dict[str, Any] = {"machine": "attic", "sha256": SHA, "size_bytes": 5}
    fields.update(changes)
    with pytest.raises(ValueError, match=exactly(message)):
        CachedFile(**fields)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpu_model": " "}, "qualification evidence names the GPU model it ran on"),
        ({"runtime": ""}, "qualification evidence names the runtime it ran on"),
    ],
)
def test_qualification_evidence_names_where_it_ran(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "artifact_id": Artifact.of_files(
            (ArtifactFile(path="m.gguf", size_bytes=5, sha256=SHA),),
            origin=Origin.CUSTOM,
            source="import",
        ).id,
        "gpu_model": "NVIDIA L4",
        "runtime": "llama-server b4000",
        "at": T0,
        "context_tokens": 4096,
        "memory": (),
        "probes": (),
    }
    fields.update(changes)
    with pytest.raises(ValueError, match=exactly(message)):
        QualificationEvidence(**fields)


URLS = ("/v1/chat/completions", "/v1/embeddings")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[1, 2]", "not a JSON object"),
        ('{"custom_id": " "}', "no custom_id (a non-empty string)"),
        (
            '{"custom_id": "a", "method": "POST", "url": "/v1/models"}',
            "url '/v1/models' is not one this batch answers (/v1/chat/completions, /v1/embeddings)",
        ),
        (
            '{"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": []}',
            "body must be a JSON object",
        ),
    ],
)
def test_a_batch_line_that_is_no_request_says_its_one_problem(line: str, problem: str) -> None:
    assert parse_batch_line(7, line, URLS, {}) == LineProblem(line_no=7, problem=problem)


def test_a_batch_line_that_is_a_request() -> None:
    line = '{"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}'
    assert parse_batch_line(7, line, URLS, {}) == BatchRequest(
        line_no=7, custom_id="a", url="/v1/embeddings", body={"input": "x"}
    )
