"""The pull use case over the contract-checked fakes (model store, registry) and the real
HTTP publisher against a publisher on 127.0.0.1: what is fetched, what is skipped, what
is recorded, and wrong bytes never counted."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from nodeau.adapters.http_publisher import HttpPublisher, fetch_url
from nodeau.apps.models.actions import PullReport, pull_model
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.tasks import Task
from nodeau.ports.models import ChecksumMismatch, FetchProgress
from tests.support.fakes.fake_registry import FakeRegistry
from tests.support.fakes.fakes import FakeDisk, FakeModelStore
from tests.support.real.publisher import LocalPublisher, local_publisher

REVISION = "0123456789abcdef0123456789abcdef01234567"
WEIGHTS = b"GGUF" + bytes(range(256)) * 64
TOKENIZER = b"tokenizer bytes"


def clock() -> datetime:
    return datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def file_of(path: str, data: bytes) -> ArtifactFile:
    return ArtifactFile(
        path=path, size_bytes=len(data), sha256=Sha256(hex=hashlib.sha256(data).hexdigest())
    )


ENTRY = CuratedEntry(
    name="tiny-chat",
    publisher="example",
    repo="example/tiny-chat",
    revision=REVISION,
    files=(file_of("model.gguf", WEIGHTS), file_of("tokenizer.json", TOKENIZER)),
)
CATALOG = Catalog(
    entries=(
        CatalogEntry(
            entry=ENTRY,
            summary=ArchitectureSummary(
                architecture="llama", parameters="1M", context_length=256, quantisation="F32"
            ),
            tasks=(Task.CHAT,),
        ),
    )
)


@contextmanager
def no_progress(_file: ArtifactFile) -> Iterator[FetchProgress]:
    yield lambda _present, _total: None


@pytest.fixture
def publisher() -> Iterator[LocalPublisher]:
    with local_publisher() as served:
        for file, data in zip(ENTRY.files, (WEIGHTS, TOKENIZER), strict=True):
            served.serve(f"/{ENTRY.repo}/resolve/{REVISION}/{file.path}", data)
        yield served


def pull(store: FakeModelStore, registry: FakeRegistry, publisher: LocalPublisher) -> PullReport:
    with httpx.Client() as client:
        return pull_model(
            "tiny-chat",
            catalog=CATALOG,
            store=store,
            publisher=HttpPublisher(client),
            registry=registry,
            url_for=lambda entry, file: fetch_url(entry.entry, file, base_url=publisher.base_url),
            progress_for=no_progress,
            on_wait=lambda _line: None,
        )


def test_pull_fetches_every_file_verifies_it_and_records_the_artifact(
    publisher: LocalPublisher, tmp_path: Path
) -> None:
    store, registry = FakeModelStore("m1", disk=FakeDisk(tmp_path), clock=clock), FakeRegistry()
    report = pull(store, registry, publisher)
    assert sorted(f.sha256.hex for f in report.fetched) == sorted(f.sha256.hex for f in ENTRY.files)
    assert all(f.verified for f in report.fetched)
    assert report.already_verified == ()
    assert registry.book().artifact(ENTRY.artifact().id) == ENTRY.artifact()
    again = pull(store, registry, publisher)  # everything is verified here already
    assert again.fetched == () and set(again.already_verified) == set(ENTRY.files)


def test_wrong_bytes_are_never_counted_verified(publisher: LocalPublisher, tmp_path: Path) -> None:
    path = f"/{ENTRY.repo}/resolve/{REVISION}/model.gguf"
    publisher.serve(path, WEIGHTS, wrong_bytes=True)
    store, registry = FakeModelStore("m1", disk=FakeDisk(tmp_path), clock=clock), FakeRegistry()
    with pytest.raises(ChecksumMismatch):
        pull(store, registry, publisher)
    weights = ENTRY.files[0]
    assert store.verified_path(weights.sha256) is None
    assert registry.book().artifact(ENTRY.artifact().id) is None


def test_an_unknown_name_is_a_model_error_naming_it(tmp_path: Path) -> None:
    from nodeau.apps.models.actions import UnknownModel

    store, registry = FakeModelStore("m1", disk=FakeDisk(tmp_path), clock=clock), FakeRegistry()
    with pytest.raises(UnknownModel, match="qwen"):
        pull_model(
            "qwen",
            catalog=CATALOG,
            store=store,
            publisher=HttpPublisher(httpx.Client()),
            registry=registry,
            url_for=lambda entry, file: "http://127.0.0.1:9/none",
            progress_for=no_progress,
            on_wait=lambda _line: None,
        )
