"""``nodeau model info`` on a fleet over fakes of the cluster's records: which artifact a name
means, where the architecture values come from, and what is shown when none can be read."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.apps.cli.info_text import info_lines
from nodeau.apps.models.actions import UnknownModel, import_model
from nodeau.apps.models.bootstrap import build as build_models
from nodeau.apps.models.services import ModelServices
from nodeau.apps.qualification.commands import THIS_MACHINE
from nodeau.apps.qualification.fleet import AmbiguousModel, fleet_model_info
from nodeau.apps.settings import settings_from, shipped_catalog
from nodeau.domain.artifacts import Sha256
from nodeau.domain.memory import GIB, MeasuredKey, MeasuredTable, Measurement
from nodeau.domain.qualification import (
    Capability,
    EvidenceBook,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
    record,
)
from tests.support.builders.controller_decisions import artifact, report
from tests.support.builders.summaries import SUMMARY
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_registry import FakeRegistry
from tests.support.real.kube_controller import HUGE_ID, SMALL_ID

SHIPPED = JsonCatalogFile(shipped_catalog()).load()
[SMOL] = SHIPPED.entries
SMOL_ID = SMOL.entry.artifact().id.hex
CONFIG = "task=chat,ctx=1024,parallel=1,batch=512,ubatch=512,k=f16,v=f16,fa=off"


class Records:
    """The cluster's qualification evidence and measured peaks, as read."""

    def __init__(self, book: EvidenceBook, table: MeasuredTable) -> None:
        self.book, self.table = book, table

    def evidence(self) -> EvidenceBook:
        return self.book

    def measurements(self) -> MeasuredTable:
        return self.table

    def record_evidence(self, evidence: QualificationEvidence) -> None:
        raise AssertionError("model info records nothing")

    def record_measurement(self, measurement: Measurement) -> None:
        raise AssertionError("model info records nothing")


def kept(artifact_id: str) -> Records:
    """One run of ``artifact_id`` (chat passed) and one peak of it measured on an L4."""
    run = QualificationEvidence(
        artifact_id=Sha256(hex=artifact_id), gpu_model="NVIDIA L4", runtime="llama-server (t)",
        at=datetime(2026, 11, 30, 20, 5, tzinfo=UTC), context_tokens=1024, memory=(),
        probes=(ProbeResult(capability=Capability.CHAT, outcome=ProbeOutcome.PASSED, asked="a",
                            answered="b", why="it said the code word"),),
        seed=3,
    )  # fmt: skip
    key = MeasuredKey(artifact_id=artifact_id, gpu_model="NVIDIA L4", config_key=CONFIG)
    return Records(record(EvidenceBook.empty(), run), MeasuredTable(measurements=(
        Measurement(key=key, peak_bytes=GIB, note="older"),
        Measurement(key=key, peak_bytes=2 * GIB, note="newest counts"),
    )))  # fmt: skip


def here(tmp_path: Path) -> ModelServices:
    s = settings_from({"NODEAU_HOME": str(tmp_path / "home"), "NODEAU_MACHINE": "laptop"})
    store = FilesystemModelStore(s.models_root, "laptop", reserve_bytes=0,
                                 clock=lambda: datetime.now(UTC))  # fmt: skip
    return build_models(s, store=store, inspector=GgufModelInspector(),
                         registry=FakeRegistry())  # fmt: skip


FLEET = (
    report("m2", 1, artifact(SMALL_ID, "qwen")),
    report("m1", 1, artifact(SMALL_ID, "qwen")),
    report("m3", 1, artifact(HUGE_ID, "split")),
)


def test_on_the_fleet_without_a_copy_here_the_reporting_machine_is_named() -> None:
    view = fleet_model_info("qwen", reports=FLEET, records=kept(SMALL_ID), catalog=SHIPPED,
                            here=None)  # fmt: skip
    assert (view.artifact_id, view.names, view.summary) == (SMALL_ID, ("qwen",), SUMMARY)
    assert view.architecture_from == "m1's verified copy (its agent's report)"
    assert view.note == (
        "this machine holds no verified copy of qwen: its architecture values are those m1 "
        "read from its own and reported"
    )
    [measured] = view.measured
    assert (measured.gpu_model, measured.config_key, measured.peak_bytes, measured.source) == (
        "NVIDIA L4", CONFIG, 2 * GIB, "measured",
    )  # fmt: skip
    assert {e.prediction.source.value for e in view.estimates} == {"estimated"}
    assert view.qualified is not None and "seed 3" in view.qualified
    assert view.capabilities[0].state == "passed"
    assert all(c.state == "not probed" for c in view.capabilities[1:])


def test_a_model_only_this_machine_knows_shows_the_clusters_records_of_its_artifact(
    tmp_path: Path,
) -> None:
    models = here(tmp_path)
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=2)
    import_model(path, alias="mine", register=True, inspector=models.inspector,
                 store=models.store, registry=models.registry)  # fmt: skip
    mine = Sha256.of_bytes(path.read_bytes()).hex
    view = fleet_model_info("mine", reports=FLEET, records=kept(mine), catalog=SHIPPED,
                            here=models)  # fmt: skip
    assert (view.artifact_id, view.architecture_from, view.note) == (mine, THIS_MACHINE, None)
    assert view.summary is not None and view.summary.architecture.n_layers == 2
    assert [m.peak_bytes for m in view.measured] == [2 * GIB]


def test_a_catalog_model_neither_here_nor_on_the_fleet_leaves_out_its_architecture(
    tmp_path: Path,
) -> None:
    view = fleet_model_info(SMOL.name, reports=FLEET, records=Records(EvidenceBook.empty(),
                            MeasuredTable()), catalog=SHIPPED, here=here(tmp_path))  # fmt: skip
    assert (view.summary, view.estimates, view.measured, view.qualified) == (None, (), (), None)
    assert view.note == (
        f"neither this machine nor any machine of the fleet holds a verified copy of {SMOL.name}, "
        "so its architecture values and estimated peaks cannot be read; pull or import it"
    )
    states = {c.capability.value: c.state for c in view.capabilities}
    assert states == {"chat": "catalog", "structured-output": "catalog", "embed": "never qualified",
                      "rerank": "never qualified", "tools": "never qualified",
                      "vision-input": "never qualified"}  # fmt: skip
    lines = info_lines(view)
    assert f"note         {view.note}" in lines
    assert "architecture not read (no verified copy); no peak VRAM estimated" in lines
    assert "measured configurations: none" in lines


def test_a_name_nobody_knows_or_the_fleet_gives_to_two_artifacts_is_a_one_line_error(
    tmp_path: Path,
) -> None:
    records = Records(EvidenceBook.empty(), MeasuredTable())
    with pytest.raises(UnknownModel, match=r"^nope: no alias, .* holds verified, nor among this"):
        fleet_model_info("nope", reports=FLEET, records=records, catalog=SHIPPED,
                         here=here(tmp_path))  # fmt: skip
    models = here(tmp_path)
    path = write_tiny_llama(tmp_path / "twice.gguf", seed=3)
    import_model(path, alias="twice", register=True, inspector=models.inspector,
                 store=models.store, registry=models.registry)  # fmt: skip
    split = (
        report("m1", 1, artifact(SMALL_ID, "twice")),
        report("m2", 1, artifact(HUGE_ID, "twice")),
    )
    with pytest.raises(AmbiguousModel, match=r"^twice names 2 different artifacts"):
        fleet_model_info("twice", reports=split, records=records, catalog=SHIPPED, here=models)
