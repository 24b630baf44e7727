"""The agent's report, built from real ports in a temporary folder: simulated cards, real store."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube.report_form import (
    MachineArtifact,
    MachineReport,
    parse_report,
    report_json,
)
from nodeau.adapters.record_json import RecordError
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory, simulated_uuid
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.machines.report import BuiltReport, build_report
from nodeau.apps.models.actions import import_model
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.memory import GIB
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.tasks import Task
from tests.support.builders.tiny_gguf import tiny_llama_bytes, write_tiny_llama

NOW = datetime(2026, 11, 30, 12, 0, 0, 250000, tzinfo=UTC)
MACHINE = "garage"


def catalog_of(name: str, data: bytes) -> Catalog:
    file = ArtifactFile(path="model.gguf", size_bytes=len(data), sha256=Sha256.of_bytes(data))
    entry = CuratedEntry(
        name=name, publisher="tests", repo=f"tests/{name}", revision="0" * 40, files=(file,)
    )
    summary = ArchitectureSummary(
        architecture="llama", parameters="tiny", context_length=256, quantisation="F32"
    )
    return Catalog(entries=(CatalogEntry(entry=entry, summary=summary, tasks=(Task.CHAT,)),))


class Ports:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = FilesystemModelStore(
            root / "models", MACHINE, reserve_bytes=0, clock=lambda: NOW
        )
        self.registry = SqliteRegistry(root / "registry.sqlite3")
        self.inspector = GgufModelInspector()
        self.inventory = SimulatedGpuInventory(MACHINE, "2 x 24 GiB")

    def import_(self, path: Path, alias: str | None, *, register: bool = True) -> Sha256:
        done = import_model(
            path, alias=alias, register=register,
            inspector=self.inspector, store=self.store, registry=self.registry,
        )  # fmt: skip
        return done.imported.sha256

    def build(self, catalog: Catalog | None = None, **kwargs: object) -> BuiltReport:
        catalog = catalog if catalog is not None else Catalog(entries=())
        return build_report(
            inventory=self.inventory, store=self.store, book=self.registry.book(),
            catalog=catalog, inspector=self.inspector, now=NOW, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip


@pytest.fixture
def ports(tmp_path: Path) -> Iterator[Ports]:
    p = Ports(tmp_path)
    yield p
    p.store.close()


def test_a_verified_model_is_reported_with_its_names_size_path_and_summary(
    ports: Ports, tmp_path: Path
) -> None:
    source = write_tiny_llama(tmp_path / "mine.gguf", seed=1)
    sha = ports.import_(source, "mine")
    built = ports.build(catalog_of("tiny-chat", source.read_bytes()))

    assert built.problems == ()
    [artifact] = built.report.artifacts
    held = ports.store.verified_path(sha)
    assert held is not None
    assert artifact.id == sha.hex == Sha256.of_bytes(source.read_bytes()).hex
    assert artifact.names == ("mine", "tiny-chat")
    assert artifact.size_bytes == source.stat().st_size
    assert artifact.path == str(held)
    assert artifact.summary == ports.inspector.inspect(source)
    assert built.report.at == NOW


def test_the_simulated_cards_are_reported_as_simulated_with_stable_uuids(
    ports: Ports, tmp_path: Path
) -> None:
    reading = ports.build().report.reading
    assert reading.machine == MACHINE and reading.simulated
    assert [g.gpu.uuid for g in reading.gpus] == [simulated_uuid(MACHINE, i) for i in range(2)]
    assert all(g.gpu.simulated and g.gpu.total_bytes == 24 * GIB for g in reading.gpus)
    # a restarted agent (new inventory, new store on the same folder) reports the same cards
    again = Ports(tmp_path)
    try:
        assert again.build().report.reading == reading
    finally:
        again.store.close()
    other = SimulatedGpuInventory("attic", "2 x 24 GiB").read()
    assert not {g.gpu.uuid for g in other.gpus} & {g.gpu.uuid for g in reading.gpus}


def test_only_verified_copies_count(ports: Ports, tmp_path: Path) -> None:
    kept = ports.import_(write_tiny_llama(tmp_path / "kept.gguf", seed=1), "kept")
    touched_source = write_tiny_llama(tmp_path / "touched.gguf", seed=2)
    touched = ports.import_(touched_source, "touched")
    blob = ports.store.verified_path(touched)
    assert blob is not None
    stat = blob.stat()
    os.utime(blob, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # changed on disk
    absent = tiny_llama_bytes(seed=3)  # in the catalog, never fetched here

    built = ports.build(catalog_of("absent", absent))
    assert [a.id for a in built.report.artifacts] == [kept.hex]
    ports.store.verify(touched)  # re-read: the bytes are still right, so it is verified again
    assert {a.id for a in ports.build().report.artifacts} == {kept.hex, touched.hex}


def test_an_unregistered_verified_file_is_reported_without_names(
    ports: Ports, tmp_path: Path
) -> None:
    sha = ports.import_(write_tiny_llama(tmp_path / "quiet.gguf", seed=4), None, register=False)
    [artifact] = ports.build().report.artifacts
    assert (artifact.id, artifact.names) == (sha.hex, ())


def test_a_file_the_inspector_cannot_read_is_left_out_and_named(
    ports: Ports, tmp_path: Path
) -> None:
    good = ports.import_(write_tiny_llama(tmp_path / "good.gguf", seed=1), "good")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 10)
    bad = ports.store.import_file(junk).sha256

    built = ports.build()
    assert [a.id for a in built.report.artifacts] == [good.hex]
    [problem] = built.problems
    assert problem.startswith(f"model {bad.hex[:12]} left out of the report: ")
    assert "\n" not in problem


def test_summaries_are_read_once_per_artifact(ports: Ports, tmp_path: Path) -> None:
    sha = ports.import_(write_tiny_llama(tmp_path / "mine.gguf", seed=1), "mine")
    kept: dict[str, ModelSummary] = {}
    first = ports.build(summaries=kept)
    assert set(kept) == {sha.hex}
    # a summary already read is not read again: one planted in the cache comes back
    planted = evolve(first.report.artifacts[0].summary, name="from-the-cache")
    kept[sha.hex] = planted
    assert ports.build(summaries=kept).report.artifacts[0].summary == planted


def test_a_report_survives_its_annotation_form(ports: Ports, tmp_path: Path) -> None:
    source = write_tiny_llama(tmp_path / "mine.gguf", seed=1)
    ports.import_(source, "mine")
    report = ports.build(catalog_of("tiny-chat", source.read_bytes())).report
    assert parse_report(report_json(report), "test report") == report


def tiny_summary() -> ModelSummary:
    with tempfile.TemporaryDirectory() as tmp:
        return GgufModelInspector().inspect(write_tiny_llama(Path(tmp) / "s.gguf", seed=9))


SUMMARY = tiny_summary()
SIMULATED_READING = SimulatedGpuInventory(MACHINE, "1 x 24 GiB").read()

readings = st.builds(
    lambda machine, cards, simulated, note: MachineReading(
        machine=machine,
        gpus=tuple(
            GpuReading(
                gpu=Gpu(
                    uuid=f"GPU-{i}-{uuid}", model=model, total_bytes=total, simulated=simulated
                ),
                free_bytes=free,
                driver_version=driver,
            )
            for i, (uuid, model, total, free, driver) in enumerate(cards)
        ),
        simulated=simulated,
        note=note,
    ),
    st.text(min_size=1).filter(str.strip),
    st.lists(
        st.tuples(st.text(), st.text(), st.integers(1, 2**50), st.integers(0, 2**50), st.text()),
        max_size=4,
    ),
    st.booleans(),
    st.text(),
)
artifacts = st.builds(
    lambda data, names, size, path: MachineArtifact(
        id=Sha256.of_bytes(data).hex,
        names=tuple(names),
        size_bytes=size,
        path=path,
        summary=SUMMARY,
    ),
    st.binary(max_size=8),
    st.lists(st.text(), max_size=3),
    st.integers(1, 2**50),
    st.text(),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(
    reading=readings,
    at=st.datetimes(timezones=st.just(UTC)),
    held=st.lists(artifacts, max_size=3),
)
def test_any_report_reads_back_from_its_annotation_text(
    reading: MachineReading, at: datetime, held: list[MachineArtifact]
) -> None:
    report = MachineReport(reading=reading, at=at, artifacts=tuple(held))
    assert parse_report(report_json(report), "a report") == report


@settings(max_examples=100, deadline=None)
@given(value=json_values, key=st.sampled_from(["machine", "at", "gpus", "artifacts", "extra"]))
def test_an_unreadable_annotation_is_a_record_error_and_nothing_else(
    value: object, key: str
) -> None:
    plain = json.loads(report_json(MachineReport(reading=SIMULATED_READING, at=NOW)))
    plain[key] = value
    try:
        report = parse_report(json.dumps(plain), "a report")
    except RecordError as exc:
        assert str(exc).startswith("a report is not")
    else:  # a value of the right form is read as what it says
        assert key != "extra" and isinstance(value, str | list)
        if key == "at":
            assert isinstance(value, str) and report.at == datetime.fromisoformat(value)
        else:
            assert json.loads(report_json(report))[key] == value
    with pytest.raises(RecordError, match="a report is not JSON"):
        parse_report(json.dumps(plain)[:-1], "a report")
