"""Deleting this machine's copy of a model (domain/removal.py ``plan_removal``): what relies
on it refuses the whole deletion, a file another model still needs here stays with why,
and files this machine does not hold are named absent, never deleted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.artifacts import Artifact, ArtifactFile, Sha256
from nodeau.domain.removal import (
    KeptFile,
    KnownArtifact,
    Reliance,
    RelianceKind,
    Removal,
    RemovalRefused,
    plan_removal,
)


def file(name: str, content: str) -> ArtifactFile:
    return ArtifactFile(path=name, size_bytes=100, sha256=Sha256.of_bytes(content.encode()))


A, B, SHARED = file("a.gguf", "a"), file("b.gguf", "b"), file("shared.gguf", "shared")
MINE = KnownArtifact(artifact=Artifact.imported([A, SHARED]), names=("mine",))
OTHER = KnownArtifact(artifact=Artifact.imported([B, SHARED]), names=("other",))


def held(*files: ArtifactFile) -> set[str]:
    return {f.sha256.hex for f in files}


def serving(target: KnownArtifact, name: str = "chat") -> Reliance:
    return Reliance(
        kind=RelianceKind.SERVICE, artifact_id=target.artifact.id.hex, name=name, state="serving"
    )


COPY_ASKED = Reliance(
    kind=RelianceKind.COPY_REQUEST, artifact_id=MINE.artifact.id.hex, name="garage", state="ready"
)


def refused_for_a_service_and_a_copy() -> Removal | RemovalRefused:
    """``mine`` asked to go while a service uses it and a copy of it is asked for."""
    return plan_removal(
        MINE, known=[MINE], held=held(A, SHARED), reliances=[serving(MINE), COPY_ASKED]
    )


def test_a_workload_using_the_model_refuses_everything_and_says_how_to_free_it() -> None:
    decided = refused_for_a_service_and_a_copy()
    assert isinstance(decided, RemovalRefused)
    assert decided.reliances == (serving(MINE), COPY_ASKED)
    assert decided.sentence.startswith("mine (")
    assert "nothing deleted" in decided.sentence
    assert "`nodeau stop chat --workload` frees it" in decided.sentence
    assert "`nodeau models copy MODEL --to garage --remove` takes it back" in decided.sentence


def test_a_file_another_model_holds_whole_here_stays_with_why() -> None:
    decided = plan_removal(MINE, known=[MINE, OTHER], held=held(A, B, SHARED), reliances=[])
    assert isinstance(decided, Removal)
    assert decided.delete == (A,)
    [kept] = decided.kept
    assert kept.path == "shared.gguf"
    assert kept.why.startswith("also a file of other (") and kept.why.endswith("held here whole")


def test_a_shared_file_goes_when_the_other_model_is_not_whole_here_nor_relied_on() -> None:
    decided = plan_removal(MINE, known=[MINE, OTHER], held=held(A, SHARED), reliances=[])
    assert isinstance(decided, Removal)
    assert set(decided.delete) == {A, SHARED} and decided.kept == ()


def test_a_shared_file_another_models_workload_uses_stays() -> None:
    decided = plan_removal(
        MINE, known=[MINE, OTHER], held=held(A, SHARED), reliances=[serving(OTHER, "other-chat")]
    )
    assert isinstance(decided, Removal)
    assert decided.delete == (A,)
    assert "service other-chat (serving) uses it" in decided.kept[0].why


def test_files_this_machine_does_not_hold_are_absent_never_deleted() -> None:
    decided = plan_removal(MINE, known=[MINE], held=held(SHARED), reliances=[])
    assert isinstance(decided, Removal)
    assert (decided.delete, decided.absent) == ((SHARED,), (A,))


@given(
    holding=st.sets(st.sampled_from([A, B, SHARED])),
    relied=st.sets(st.sampled_from(["mine", "other"])),
)
def test_nothing_relied_on_is_ever_deleted_and_every_held_file_is_accounted_for(
    holding: set[ArtifactFile], relied: set[str]
) -> None:
    by_name = {"mine": MINE, "other": OTHER}
    reliances = [serving(by_name[n], f"{n}-chat") for n in sorted(relied)]
    decided = plan_removal(MINE, known=[MINE, OTHER], held=held(*holding), reliances=reliances)
    if "mine" in relied:
        assert isinstance(decided, RemovalRefused)
        return
    assert isinstance(decided, Removal)
    deleted = {f.sha256.hex for f in decided.delete}
    kept = {k.sha256 for k in decided.kept}
    assert deleted | kept == held(*holding) & held(A, SHARED)
    assert not deleted & kept and not deleted & {f.sha256.hex for f in decided.absent}
    if "other" in relied:
        assert SHARED.sha256.hex not in deleted


def test_a_refusal_names_the_model_and_says_every_reliance_in_full() -> None:
    decided = refused_for_a_service_and_a_copy()
    assert decided == RemovalRefused(
        artifact_id=MINE.artifact.id.hex,
        names=("mine",),
        reliances=(serving(MINE), COPY_ASKED),
        sentence=f"{MINE.words}: nothing deleted: service chat (serving) uses it; "
        "`nodeau stop chat --workload` frees it; a copy request asks garage to keep it "
        "(ready); `nodeau models copy MODEL --to garage --remove` takes it back",
    )


def test_a_shared_file_stays_for_the_model_that_shares_it_whatever_the_models_before() -> None:
    unrelated = KnownArtifact(artifact=Artifact.imported([file("c.gguf", "c")]), names=("c",))
    both = [serving(OTHER, "other-chat"), serving(OTHER, "other-too")]
    decided = plan_removal(
        MINE, known=[MINE, unrelated, OTHER], held=held(A, SHARED), reliances=both
    )
    assert decided == Removal(
        artifact_id=MINE.artifact.id.hex,
        names=("mine",),
        delete=(A,),
        kept=(
            KeptFile(
                path="shared.gguf",
                sha256=SHARED.sha256.hex,
                size_bytes=100,
                why=f"also a file of {OTHER.words}, which service other-chat (serving) uses "
                "it; `nodeau stop other-chat --workload` frees it; service other-too (serving) "
                "uses it; `nodeau stop other-too --workload` frees it",
            ),
        ),
        absent=(),
    )
