"""Artifacts: identity is the SHA-256 of the bytes, curated entries are pinned."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.artifacts import (
    IMPORTED_SOURCE,
    Artifact,
    ArtifactFile,
    CuratedEntry,
    Origin,
    Sha256,
    artifact_id_for,
    canonical_files,
    is_immutable_revision,
    is_sha256_hex,
    manifest_text,
    relative_path_problem,
)

EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ABC_SHA = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
shas = st.binary(max_size=16).map(Sha256.of_bytes)
_part = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
paths = st.lists(_part, min_size=1, max_size=3).map(lambda parts: "/".join(parts) + ".gguf")


def sha(n: int) -> Sha256:
    return Sha256.of_bytes(str(n).encode())


def afile(path: str, n: int, size: int = 100) -> ArtifactFile:
    return ArtifactFile(path=path, size_bytes=size, sha256=sha(n))


@st.composite
def file_sets(draw: st.DrawFn, min_size: int = 1, max_size: int = 5) -> list[ArtifactFile]:
    names = draw(st.lists(paths, min_size=min_size, max_size=max_size, unique=True))
    return [
        ArtifactFile(path=p, size_bytes=draw(st.integers(1, 10**12)), sha256=draw(shas))
        for p in names
    ]


# --- Sha256 -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (EMPTY_SHA, True),
        (ABC_SHA, True),
        ("0" * 64, True),
        (EMPTY_SHA.upper(), False),
        (EMPTY_SHA[:63], False),
        (EMPTY_SHA + "0", False),
        ("g" * 64, False),
        (" " + EMPTY_SHA[1:], False),
        ("sha256:" + EMPTY_SHA, False),
        ("", False),
    ],
)
def test_sha256_constructor_takes_only_lowercase_64_hex(text: str, ok: bool) -> None:
    assert is_sha256_hex(text) is ok
    if ok:
        assert Sha256(hex=text).hex == text
    else:
        with pytest.raises(ValueError, match="not a lowercase 64-hex SHA-256"):
            Sha256(hex=text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (EMPTY_SHA, Success(Sha256(hex=EMPTY_SHA))),
        (EMPTY_SHA.upper(), Success(Sha256(hex=EMPTY_SHA))),
        (f"  {EMPTY_SHA}\n", Success(Sha256(hex=EMPTY_SHA))),
        (f"sha256:{EMPTY_SHA}", Success(Sha256(hex=EMPTY_SHA))),
        ("abc", Failure("a SHA-256 is 64 hexadecimal digits; 'abc' has 3")),
        ("", Failure("a SHA-256 is 64 hexadecimal digits; '' has 0")),
        (
            "z" * 64,
            Failure(f"a SHA-256 is 64 hexadecimal digits (0-9, a-f); {'z' * 64!r} is not"),
        ),
    ],
)
def test_sha256_parse_of_user_input(text: str, expected: object) -> None:
    assert Sha256.parse(text) == expected


def test_sha256_of_bytes_matches_known_vectors() -> None:
    assert Sha256.of_bytes(b"") == Sha256(hex=EMPTY_SHA)
    assert Sha256.of_bytes(b"abc") == Sha256(hex=ABC_SHA)


def test_sha256_short_and_str() -> None:
    digest = Sha256(hex=ABC_SHA)
    assert digest.short == "ba7816bf8f01"
    assert str(digest) == ABC_SHA


@given(hex64)
def test_parse_accepts_every_constructible_digest(text: str) -> None:
    assert Sha256.parse(text).unwrap() == Sha256(hex=text)
    assert Sha256.parse(text.upper()).unwrap() == Sha256(hex=text)


# --- paths and files --------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("model.gguf", None),
        ("sub/dir/model-00001-of-00002.gguf", None),
        ("", "a file path cannot be empty"),
        ("/abs/model.gguf", "a file path must be relative, not absolute: '/abs/model.gguf'"),
        ("C:model.gguf", "a file path must be relative, not absolute: 'C:model.gguf'"),
        ("../model.gguf", "a file path cannot climb out with '..': '../model.gguf'"),
        ("a/../model.gguf", "a file path cannot climb out with '..': 'a/../model.gguf'"),
        ("./model.gguf", "a file path must be canonical (no '.', no empty part): './model.gguf'"),
        ("a//b.gguf", "a file path must be canonical (no '.', no empty part): 'a//b.gguf'"),
        ("a/", "a file path must be canonical (no '.', no empty part): 'a/'"),
        ("a\\b.gguf", "a file path uses '/' as separator, not '\\': 'a\\\\b.gguf'"),
        ("a\nb.gguf", "a file path cannot contain control characters: 'a\\nb.gguf'"),
        ("a\0b.gguf", "a file path cannot contain control characters: 'a\\x00b.gguf'"),
        ("a\x7fb.gguf", "a file path cannot contain control characters: 'a\\x7fb.gguf'"),
        ("..model.gguf", None),
        ("my model.gguf", None),
        ("a/./b.gguf", "a file path must be canonical (no '.', no empty part): 'a/./b.gguf'"),
    ],
)
def test_relative_path_problem(path: str, problem: str | None) -> None:
    assert relative_path_problem(path) == problem


def test_artifact_file_rejects_bad_path_and_size() -> None:
    with pytest.raises(ValueError, match="climb out"):
        ArtifactFile(path="../x.gguf", size_bytes=1, sha256=sha(1))
    with pytest.raises(ValueError, match="size_bytes must be positive, got 0"):
        ArtifactFile(path="x.gguf", size_bytes=0, sha256=sha(1))
    assert ArtifactFile(path="x.gguf", size_bytes=1, sha256=sha(1)).size_bytes == 1


def test_canonical_files_sorts_and_rejects_duplicates_and_empty() -> None:
    b, a = afile("b.gguf", 1), afile("a.gguf", 2)
    assert canonical_files([b, a]) == (a, b)
    with pytest.raises(ValueError, match="at least one file"):
        canonical_files([])
    with pytest.raises(ValueError, match="lists a file path twice"):
        canonical_files([a, afile("a.gguf", 3)])


# --- identity ---------------------------------------------------------------


def test_one_file_artifact_id_is_that_files_sha() -> None:
    assert artifact_id_for([afile("model.gguf", 7)]) == sha(7)


def test_several_file_artifact_id_is_sha_of_sorted_manifest() -> None:
    first, second = afile("m-00001-of-00002.gguf", 1), afile("m-00002-of-00002.gguf", 2)
    manifest = f"m-00001-of-00002.gguf\0{sha(1).hex}\nm-00002-of-00002.gguf\0{sha(2).hex}\n"
    assert manifest_text([second, first]) == manifest
    expected = Sha256(hex=hashlib.sha256(manifest.encode()).hexdigest())
    assert artifact_id_for([first, second]) == expected
    assert artifact_id_for([second, first]) == expected
    assert expected not in (sha(1), sha(2))


@given(shas, paths, paths, st.integers(1, 10**12))
def test_one_file_identity_ignores_name_and_size(
    digest: Sha256, path: str, other: str, size: int
) -> None:
    one = ArtifactFile(path=path, size_bytes=size, sha256=digest)
    two = ArtifactFile(path=other, size_bytes=size + 1, sha256=digest)
    assert artifact_id_for([one]) == artifact_id_for([two]) == digest


@settings(max_examples=50)
@given(file_sets(min_size=2), st.data())
def test_several_file_identity_ignores_listing_order(
    files: list[ArtifactFile], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(files))
    assert artifact_id_for(shuffled) == artifact_id_for(files)


@settings(max_examples=50)
@given(file_sets(min_size=2), st.data())
def test_changing_any_files_bytes_changes_identity(
    files: list[ArtifactFile], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(files) - 1))
    other = data.draw(shas.filter(lambda s: s != files[i].sha256))
    changed = [
        *files[:i],
        ArtifactFile(path=files[i].path, size_bytes=1, sha256=other),
        *files[i + 1 :],
    ]
    assert artifact_id_for(changed) != artifact_id_for(files)


# --- artifacts and catalog entries ------------------------------------------


def test_artifact_rejects_an_id_that_is_not_its_files() -> None:
    with pytest.raises(ValueError, match="is not its files' id"):
        Artifact(id=sha(99), origin=Origin.CUSTOM, files=(afile("m.gguf", 1),), source="imported")
    with pytest.raises(ValueError, match="needs a source"):
        Artifact(id=sha(1), origin=Origin.CUSTOM, files=(afile("m.gguf", 1),), source=" ")


def test_imported_artifact_is_custom_with_sorted_files_and_total_size() -> None:
    b, a = afile("b.gguf", 1, size=30), afile("a.gguf", 2, size=12)
    art = Artifact.imported([b, a])
    assert art.origin is Origin.CUSTOM
    assert art.source == IMPORTED_SOURCE == "imported"
    assert art.files == (a, b)
    assert art.size_bytes == 42
    assert art.id == artifact_id_for([a, b])


def test_origin_values_cross_boundaries_as_strings() -> None:
    assert [o.value for o in Origin] == ["curated", "custom"]


def entry(revision: str = COMMIT, files: tuple[ArtifactFile, ...] | None = None) -> CuratedEntry:
    return CuratedEntry(
        name="qwen3.5-4b-q4km",
        publisher="Qwen",
        repo="Qwen3.5-4B-GGUF",
        revision=revision,
        files=files if files is not None else (afile("qwen-q4km.gguf", 5, size=2_500),),
    )


@pytest.mark.parametrize(
    ("revision", "immutable"),
    [
        (COMMIT, True),
        ("main", False),
        ("v1.0", False),
        (COMMIT[:39], False),
        (COMMIT + "0", False),
        (COMMIT.upper(), False),
        ("", False),
    ],
)
def test_curated_entry_pins_an_immutable_revision(revision: str, immutable: bool) -> None:
    assert is_immutable_revision(revision) is immutable
    if immutable:
        assert entry(revision).revision == revision
    else:
        with pytest.raises(ValueError, match="must pin a 40-hex commit id"):
            entry(revision)


def test_curated_entry_needs_files_names_and_unique_paths() -> None:
    with pytest.raises(ValueError, match="at least one file"):
        entry(files=())
    with pytest.raises(ValueError, match="twice"):
        entry(files=(afile("a.gguf", 1), afile("a.gguf", 2)))
    with pytest.raises(ValueError, match="needs a publisher"):
        CuratedEntry(name="n", publisher="", repo="r", revision=COMMIT, files=(afile("a", 1),))
    with pytest.raises(ValueError, match="needs a name"):
        CuratedEntry(name=" ", publisher="p", repo="r", revision=COMMIT, files=(afile("a", 1),))
    with pytest.raises(ValueError, match="needs a repo"):
        CuratedEntry(name="n", publisher="p", repo="", revision=COMMIT, files=(afile("a", 1),))


def test_curated_entry_artifact() -> None:
    art = entry().artifact()
    assert art.origin is Origin.CURATED
    assert art.source == f"Qwen/Qwen3.5-4B-GGUF@{COMMIT}"
    assert art.id == sha(5)
    assert art.size_bytes == 2_500


def test_same_bytes_curated_or_imported_are_one_artifact() -> None:
    files = (afile("m-00001-of-00002.gguf", 1), afile("m-00002-of-00002.gguf", 2))
    curated = entry(files=files).artifact()
    custom = Artifact.imported(reversed(files))
    assert curated.id == custom.id
    assert curated.files == custom.files


@settings(max_examples=50)
@given(file_sets())
def test_curated_and_custom_identity_agree_for_any_files(files: list[ArtifactFile]) -> None:
    assert entry(files=tuple(files)).artifact().id == Artifact.imported(files).id
