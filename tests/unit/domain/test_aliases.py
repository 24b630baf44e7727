"""Aliases: append-only names for artifacts; an alias never repoints an old artifact."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.aliases import (
    ALIAS_MAX_LENGTH,
    AliasBook,
    ImportKind,
    alias_problem,
    import_sentence,
    import_under_alias,
    parse_alias,
    record_artifact,
)
from nodeau.domain.artifacts import Artifact, ArtifactFile, ArtifactId, CuratedEntry, Sha256
from nodeau.domain.qualification import (
    Capability,
    EvidenceBook,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
    record,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def sha(n: int) -> Sha256:
    return Sha256.of_bytes(str(n).encode())


def art(n: int) -> Artifact:
    return Artifact.imported([ArtifactFile(path="model.gguf", size_bytes=10 + n, sha256=sha(n))])


A, B, C = art(1), art(2), art(3)


def evidence(artifact_id: ArtifactId, gpu: str = "RTX 4090") -> QualificationEvidence:
    return QualificationEvidence(
        artifact_id=artifact_id,
        gpu_model=gpu,
        runtime="llama-server 0.5.0-dev",
        at=datetime(2026, 11, 30, tzinfo=UTC),
        context_tokens=512,
        memory=(),
        probes=(
            ProbeResult(
                capability=Capability.CHAT,
                outcome=ProbeOutcome.PASSED,
                asked="say the nonce",
                answered="the nonce",
                why="the reply holds the nonce",
            ),
        ),
    )


# --- alias names ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("qwen", None),
        ("my-model_v2.q4:latest", None),
        ("7b", None),
        ("a" * ALIAS_MAX_LENGTH, None),
        ("", "an alias cannot be empty"),
        ("a" * 129, f"an alias has at most 128 characters; {'a' * 20!r}… has 129"),
        ("my model", "an alias cannot contain spaces or other blanks: 'my model'"),
        ("tab\there", "an alias cannot contain spaces or other blanks: 'tab\\there'"),
        (
            "-rm",
            "an alias starts with a letter or digit and uses only letters, digits"
            " and . _ : - : '-rm' does not",
        ),
        (
            "qwen/7b",
            "an alias starts with a letter or digit and uses only letters, digits"
            " and . _ : - : 'qwen/7b' does not",
        ),
        (
            "modèle",
            "an alias starts with a letter or digit and uses only letters, digits"
            " and . _ : - : 'modèle' does not",
        ),
        (
            sha(1).hex,
            f"an alias cannot look like an artifact id (64 hex digits): {sha(1).hex!r}",
        ),
        (
            sha(1).hex.upper(),
            f"an alias cannot look like an artifact id (64 hex digits): {sha(1).hex.upper()!r}",
        ),
    ],
)
def test_alias_names(text: str, problem: str | None) -> None:
    assert alias_problem(text) == problem
    assert parse_alias(text) == (Success(text) if problem is None else Failure(problem))


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True))
def test_every_charset_alias_parses(text: str) -> None:
    assert parse_alias(text).unwrap() == text


# --- imports ----------------------------------------------------------------


def test_first_import_under_an_alias() -> None:
    book, outcome = import_under_alias(AliasBook.empty(), "qwen", A)
    assert outcome.kind is ImportKind.NEW_ALIAS
    assert (outcome.alias, outcome.artifact_id, outcome.previous) == ("qwen", A.id, None)
    assert outcome.created is True
    assert outcome.sentence == f"Recorded new artifact {A.id.short}; alias 'qwen' now names it."
    assert book.resolve("qwen") == A.id
    assert book.history("qwen") == (A.id,)
    assert book.artifact(A.id) == A
    assert book.aliases == ("qwen",)


def test_same_bytes_again_changes_nothing() -> None:
    book, _ = import_under_alias(AliasBook.empty(), "qwen", A)
    again, outcome = import_under_alias(book, "qwen", art(1))
    assert again == book
    assert outcome.kind is ImportKind.SAME_ARTIFACT
    assert (outcome.artifact_id, outcome.previous, outcome.created) == (A.id, A.id, False)
    assert outcome.sentence == (
        f"Alias 'qwen' already names artifact {A.id.short}: the same bytes, nothing changed."
    )


def test_different_bytes_under_a_used_alias_create_a_new_artifact_and_say_so() -> None:
    book, _ = import_under_alias(AliasBook.empty(), "qwen", A)
    after, outcome = import_under_alias(book, "qwen", B)
    assert outcome.kind is ImportKind.NEW_ARTIFACT_UNDER_USED_ALIAS
    assert (outcome.artifact_id, outcome.previous, outcome.created) == (B.id, A.id, True)
    assert outcome.sentence == (
        f"Created a NEW artifact {B.id.short} under alias 'qwen', which named artifact"
        f" {A.id.short} until now. Artifact {A.id.short} is untouched and still reachable by"
        f" its id; its qualification evidence does not carry over to {B.id.short}."
    )
    assert after.resolve("qwen") == B.id
    assert after.history("qwen") == (A.id, B.id)
    assert after.artifact(A.id) == A
    assert after.artifact(B.id) == B
    # the earlier book value is untouched too
    assert book.history("qwen") == (A.id,)
    assert book.artifact(B.id) is None


def test_returning_to_earlier_bytes_appends_and_does_not_claim_a_new_artifact() -> None:
    book = AliasBook.empty()
    for artifact in (A, B):
        book, _ = import_under_alias(book, "qwen", artifact)
    after, outcome = import_under_alias(book, "qwen", A)
    assert outcome.kind is ImportKind.KNOWN_ARTIFACT_UNDER_USED_ALIAS
    assert (outcome.artifact_id, outcome.previous, outcome.created) == (A.id, B.id, False)
    assert outcome.sentence == (
        f"Alias 'qwen' now names artifact {A.id.short} (already recorded, different bytes)"
        f" instead of artifact {B.id.short}. Artifact {B.id.short} is untouched and still"
        f" reachable by its id; its qualification evidence does not carry over to {A.id.short}."
    )
    assert after.history("qwen") == (A.id, B.id, A.id)


def test_known_bytes_under_a_fresh_alias() -> None:
    book, _ = import_under_alias(AliasBook.empty(), "one", A)
    after, outcome = import_under_alias(book, "two", A)
    assert outcome.kind is ImportKind.NEW_ALIAS
    assert outcome.created is False
    assert outcome.sentence == (
        f"Artifact {A.id.short} (already recorded); alias 'two' now names it."
    )
    assert (after.resolve("one"), after.resolve("two")) == (A.id, A.id)


def test_no_register_import_records_the_artifact_and_touches_no_alias() -> None:
    book, _ = import_under_alias(AliasBook.empty(), "qwen", A)
    after, outcome = import_under_alias(book, None, B)
    assert outcome.kind is ImportKind.UNREGISTERED
    assert (outcome.alias, outcome.artifact_id, outcome.previous) == (None, B.id, None)
    assert outcome.created is True
    assert outcome.sentence == f"Recorded new artifact {B.id.short}, under no alias."
    assert after.histories == book.histories
    assert after.artifact(B.id) == B
    again, outcome = import_under_alias(after, None, B)
    assert again == after
    assert outcome.created is False
    assert outcome.sentence == f"Artifact {B.id.short} (already recorded), under no alias."


def test_an_artifact_record_is_never_replaced_by_a_later_arrival() -> None:
    curated = CuratedEntry(
        name="qwen", publisher="Qwen", repo="Q-GGUF", revision=COMMIT, files=A.files
    ).artifact()
    book, created = record_artifact(AliasBook.empty(), curated)
    assert created is True
    after, outcome = import_under_alias(book, "mine", A)
    assert outcome.created is False
    assert after.artifact(A.id) == curated
    assert after.artifact(A.id) != A


def test_import_rejects_an_unchecked_alias() -> None:
    with pytest.raises(ValueError, match="cannot contain spaces"):
        import_under_alias(AliasBook.empty(), "bad alias", A)


def test_import_kind_values() -> None:
    assert [k.value for k in ImportKind] == [
        "new-alias",
        "same-artifact",
        "new-artifact-under-used-alias",
        "known-artifact-under-used-alias",
        "unregistered",
    ]


def test_sentence_without_previous_names_none() -> None:
    sentence = import_sentence(ImportKind.NEW_ARTIFACT_UNDER_USED_ALIAS, "x", A.id, None, True)
    assert "which named artifact none until now" in sentence


# --- the book's own invariants ----------------------------------------------


def test_book_rejects_inconsistent_contents() -> None:
    with pytest.raises(ValueError, match="names artifacts never recorded"):
        AliasBook(histories={"qwen": (A.id,)}, artifacts={})
    with pytest.raises(ValueError, match="empty history"):
        AliasBook(histories={"qwen": ()}, artifacts={})
    with pytest.raises(ValueError, match="is filed under"):
        AliasBook(histories={}, artifacts={B.id: A})
    with pytest.raises(ValueError, match="cannot be empty"):
        AliasBook(histories={"": (A.id,)}, artifacts={A.id: A})


def test_book_does_not_share_the_callers_dicts() -> None:
    histories = {"qwen": (A.id,)}
    artifacts = {A.id: A}
    book = AliasBook(histories=histories, artifacts=artifacts)
    histories["qwen"] = (B.id,)
    artifacts[B.id] = B
    assert book.resolve("qwen") == A.id
    assert book.artifact(B.id) is None
    with pytest.raises(TypeError):
        book.histories["qwen"] = (B.id,)  # type: ignore[index]


def test_unused_alias() -> None:
    book = AliasBook.empty()
    assert book.resolve("nope") is None
    assert book.history("nope") == ()
    assert book.aliases == ()


# --- property: an alias never repoints --------------------------------------

POOL = [art(n) for n in range(6)]
steps = st.lists(
    st.tuples(st.sampled_from(["qwen", "llama", "mine", None]), st.integers(0, len(POOL) - 1)),
    max_size=25,
)


def expected_kind(book: AliasBook, alias: str | None, artifact: Artifact) -> ImportKind:
    if alias is None:
        return ImportKind.UNREGISTERED
    current = book.resolve(alias)
    if current is None:
        return ImportKind.NEW_ALIAS
    if current == artifact.id:
        return ImportKind.SAME_ARTIFACT
    if book.artifact(artifact.id) is None:
        return ImportKind.NEW_ARTIFACT_UNDER_USED_ALIAS
    return ImportKind.KNOWN_ARTIFACT_UNDER_USED_ALIAS


@given(steps, st.sets(st.integers(0, len(POOL) - 1)))
def test_an_alias_never_repoints(
    sequence: list[tuple[str | None, int]], qualified: set[int]
) -> None:
    evidence_book = EvidenceBook.empty()
    for i in sorted(qualified):
        evidence_book = record(evidence_book, evidence(POOL[i].id))
    book = AliasBook.empty()
    first_records: dict[ArtifactId, Artifact] = {}
    for alias, index in sequence:
        artifact = POOL[index]
        before = book
        book, outcome = import_under_alias(before, alias, artifact)
        assert outcome.kind is expected_kind(before, alias, artifact)
        assert outcome.artifact_id == artifact.id
        assert outcome.previous == (None if alias is None else before.resolve(alias))
        first_records.setdefault(artifact.id, artifact)
        # every artifact ever recorded keeps its record and stays resolvable by id
        assert dict(book.artifacts) == first_records
        # every alias's history is append-only; only the imported alias may grow, by one
        for name in before.aliases:
            old = before.history(name)
            assert book.history(name)[: len(old)] == old
            grew = len(book.history(name)) - len(old)
            moved = name == alias and outcome.kind is not ImportKind.SAME_ARTIFACT
            assert grew == (1 if moved else 0)
        if alias is not None:
            assert book.resolve(alias) == artifact.id
        # evidence through an alias is only that of the artifact it names now
        for name in book.aliases:
            current = book.resolve(name)
            assert current is not None
            found = evidence_book.for_alias(book, name)
            assert found == evidence_book.for_artifact(current)
            if found is not None:
                assert found.artifact_id == current
            if current.hex not in {POOL[i].id.hex for i in qualified}:
                assert found is None


def _one_file(data: bytes) -> Artifact:
    return Artifact.imported(
        [ArtifactFile(path="m.gguf", size_bytes=len(data), sha256=Sha256.of_bytes(data))]
    )


def test_append_only_accepts_additions_and_names_each_rewrite() -> None:
    from nodeau.domain.aliases import append_only_problem

    a, b = _one_file(b"a"), _one_file(b"b")
    before, _ = import_under_alias(AliasBook.empty(), "m", a)
    after, _ = import_under_alias(before, "m", b)
    assert append_only_problem(before, after) is None
    assert append_only_problem(before, before) is None
    repointed = AliasBook(histories={"m": (b.id,)}, artifacts=after.artifacts)
    assert append_only_problem(before, repointed) == "alias m's history would be rewritten"
    assert append_only_problem(before, AliasBook.empty()) == (
        f"artifact {a.id.hex} would be changed or removed"
    )
