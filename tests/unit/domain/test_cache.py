"""Model cache: downloaded and verified are separate facts; only verified is placeable."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.artifacts import Artifact, ArtifactFile, Sha256
from nodeau.domain.cache import (
    CachedFile,
    CopyState,
    ModelCache,
    artifact_state,
    file_state,
    placeable_machines,
    record_bytes,
    record_changed_on_disk,
    record_verification,
    wanted_file_state,
)

AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
SIZE = 1_000


def sha(n: int) -> Sha256:
    return Sha256.of_bytes(str(n).encode())


GOOD, BAD = sha(1), sha(666)
FILE = ArtifactFile(path="model.gguf", size_bytes=SIZE, sha256=GOOD)
SPLIT = Artifact.imported(
    [
        ArtifactFile(path="m-00001-of-00002.gguf", size_bytes=SIZE, sha256=sha(11)),
        ArtifactFile(path="m-00002-of-00002.gguf", size_bytes=2 * SIZE, sha256=sha(12)),
    ]
)


def cached(
    bytes_present: int = 0, computed: Sha256 | None = None, machine: str = "garage"
) -> CachedFile:
    return CachedFile(
        machine=machine,
        sha256=GOOD,
        size_bytes=SIZE,
        bytes_present=bytes_present,
        computed_sha256=computed,
        verified_at=AT if computed is not None else None,
    )


def test_copy_state_values() -> None:
    assert [s.value for s in CopyState] == [
        "missing",
        "partial",
        "downloaded",
        "verified",
        "mismatch",
    ]


@pytest.mark.parametrize(
    ("bytes_present", "computed", "state", "downloaded", "verified"),
    [
        (0, None, CopyState.MISSING, False, False),
        (1, None, CopyState.PARTIAL, False, False),
        (SIZE - 1, None, CopyState.PARTIAL, False, False),
        (SIZE - 1, GOOD, CopyState.PARTIAL, False, False),
        (SIZE - 1, BAD, CopyState.PARTIAL, False, False),
        (SIZE, None, CopyState.DOWNLOADED, True, False),
        (SIZE, GOOD, CopyState.VERIFIED, True, True),
        (SIZE, BAD, CopyState.MISMATCH, True, False),
        (SIZE + 1, None, CopyState.MISMATCH, False, False),
        (SIZE + 1, GOOD, CopyState.MISMATCH, False, False),
    ],
)
def test_file_state_matrix(
    bytes_present: int, computed: Sha256 | None, state: CopyState, downloaded: bool, verified: bool
) -> None:
    f = cached(bytes_present, computed)
    assert file_state(f) is state
    assert f.state is state
    assert f.downloaded is downloaded
    assert f.verified is verified


def test_cached_file_validation() -> None:
    with pytest.raises(ValueError, match="named machine"):
        cached(machine=" ")
    with pytest.raises(ValueError, match="bytes_present cannot be negative"):
        cached(bytes_present=-1)
    with pytest.raises(ValueError, match="size_bytes must be positive"):
        CachedFile(machine="m", sha256=GOOD, size_bytes=0)
    with pytest.raises(ValueError, match="come together"):
        CachedFile(machine="m", sha256=GOOD, size_bytes=1, computed_sha256=GOOD)
    with pytest.raises(ValueError, match="come together"):
        CachedFile(machine="m", sha256=GOOD, size_bytes=1, verified_at=AT)


def test_expecting_starts_missing() -> None:
    f = CachedFile.expecting("garage", FILE)
    assert (f.machine, f.sha256, f.size_bytes, f.bytes_present) == ("garage", GOOD, SIZE, 0)
    assert f.state is CopyState.MISSING


def test_download_then_verify() -> None:
    f = record_bytes(CachedFile.expecting("garage", FILE), SIZE)
    assert f.state is CopyState.DOWNLOADED
    checked = record_verification(f, GOOD, AT)
    assert checked.state is CopyState.VERIFIED
    assert checked.verified_at == AT
    damaged = record_verification(f, BAD, AT)
    assert damaged.state is CopyState.MISMATCH
    assert damaged.computed_sha256 == BAD


def test_any_change_of_bytes_drops_verification() -> None:
    verified = cached(SIZE, GOOD)
    assert record_bytes(verified, SIZE) == verified
    shrunk = record_bytes(verified, SIZE - 1)
    assert (shrunk.computed_sha256, shrunk.verified_at, shrunk.bytes_present) == (
        None,
        None,
        SIZE - 1,
    )
    regrown = record_bytes(shrunk, SIZE)
    assert regrown.state is CopyState.DOWNLOADED


def test_a_file_changed_on_disk_is_no_longer_verified() -> None:
    changed = record_changed_on_disk(cached(SIZE, GOOD))
    assert changed.state is CopyState.DOWNLOADED
    assert (changed.computed_sha256, changed.verified_at) == (None, None)
    assert record_changed_on_disk(cached(SIZE, BAD)).state is CopyState.DOWNLOADED


@given(
    st.integers(0, 2 * SIZE),
    st.one_of(st.none(), st.sampled_from([GOOD, BAD])),
    st.integers(0, 2 * SIZE),
    st.sampled_from([GOOD, BAD]),
)
def test_transitions(start: int, computed: Sha256 | None, new_bytes: int, check: Sha256) -> None:
    f = cached(start, computed)
    moved = record_bytes(f, new_bytes)
    if new_bytes != start:
        assert not moved.verified
        assert moved.computed_sha256 is None
    else:
        assert moved == f
    checked = record_verification(moved, check, AT)
    assert checked.verified is (check == GOOD and new_bytes == SIZE)
    assert not record_changed_on_disk(checked).verified
    assert (checked.state is CopyState.VERIFIED) is checked.verified


# --- whole artifacts --------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "whole"),
    [
        ([CopyState.VERIFIED], CopyState.VERIFIED),
        ([CopyState.VERIFIED, CopyState.VERIFIED], CopyState.VERIFIED),
        ([CopyState.VERIFIED, CopyState.DOWNLOADED], CopyState.DOWNLOADED),
        ([CopyState.DOWNLOADED, CopyState.DOWNLOADED], CopyState.DOWNLOADED),
        ([CopyState.VERIFIED, CopyState.MISSING], CopyState.PARTIAL),
        ([CopyState.VERIFIED, CopyState.PARTIAL], CopyState.PARTIAL),
        ([CopyState.DOWNLOADED, CopyState.MISSING], CopyState.PARTIAL),
        ([CopyState.MISSING, CopyState.MISSING], CopyState.MISSING),
        ([CopyState.MISSING, CopyState.PARTIAL], CopyState.PARTIAL),
        ([CopyState.VERIFIED, CopyState.MISMATCH], CopyState.MISMATCH),
        ([CopyState.MISSING, CopyState.MISMATCH], CopyState.MISMATCH),
    ],
)
def test_artifact_state_matrix(states: list[CopyState], whole: CopyState) -> None:
    assert artifact_state(states) is whole


def test_artifact_state_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one file"):
        artifact_state([])


def test_an_entry_that_disagrees_with_the_artifact_file_is_a_mismatch() -> None:
    assert wanted_file_state(None, FILE) is CopyState.MISSING
    assert wanted_file_state(cached(SIZE, GOOD), FILE) is CopyState.VERIFIED
    other_size = ArtifactFile(path="model.gguf", size_bytes=SIZE + 5, sha256=GOOD)
    assert wanted_file_state(cached(SIZE, GOOD), other_size) is CopyState.MISMATCH
    other_sha = ArtifactFile(path="model.gguf", size_bytes=SIZE, sha256=BAD)
    assert wanted_file_state(cached(SIZE, GOOD), other_sha) is CopyState.MISMATCH


def entry(machine: str, f: ArtifactFile, present: int, computed: Sha256 | None) -> CachedFile:
    return CachedFile(
        machine=machine,
        sha256=f.sha256,
        size_bytes=f.size_bytes,
        bytes_present=present,
        computed_sha256=computed,
        verified_at=AT if computed is not None else None,
    )


def test_model_cache_copy_state_and_placeable_machines() -> None:
    one, two = SPLIT.files
    cache = ModelCache(
        files=(
            entry("garage", one, one.size_bytes, one.sha256),
            entry("garage", two, two.size_bytes, two.sha256),
            entry("desk", one, one.size_bytes, one.sha256),
            entry("desk", two, two.size_bytes, None),
            entry("attic", one, one.size_bytes, one.sha256),
            entry("loft", one, one.size_bytes, one.sha256),
            entry("loft", two, two.size_bytes, BAD),
        )
    )
    assert cache.machines == {"garage", "desk", "attic", "loft"}
    assert cache.copy_state("garage", SPLIT) is CopyState.VERIFIED
    assert cache.copy_state("desk", SPLIT) is CopyState.DOWNLOADED
    assert cache.copy_state("attic", SPLIT) is CopyState.PARTIAL
    assert cache.copy_state("loft", SPLIT) is CopyState.MISMATCH
    assert cache.copy_state("nowhere", SPLIT) is CopyState.MISSING
    assert placeable_machines(cache, SPLIT) == frozenset({"garage"})

    desk_two = cache.file("desk", two.sha256)
    assert desk_two is not None
    desk_checked = record_verification(desk_two, two.sha256, AT)
    cache = cache.with_file(desk_checked)
    assert placeable_machines(cache, SPLIT) == frozenset({"garage", "desk"})
    cache = cache.with_file(record_changed_on_disk(desk_checked))
    assert placeable_machines(cache, SPLIT) == frozenset({"garage"})
    assert len(cache.files) == 7


def test_model_cache_rejects_a_file_twice_per_machine() -> None:
    with pytest.raises(ValueError, match="lists file"):
        ModelCache(files=(cached(1), cached(2)))
    assert ModelCache().machines == frozenset()
    assert ModelCache().file("garage", GOOD) is None


# --- property: only a verified copy is placeable ----------------------------

MACHINES = ["garage", "desk", "attic"]
copies = st.tuples(
    st.sampled_from(["absent", "partial", "full", "over"]),
    st.sampled_from(["none", "right", "wrong"]),
)


@given(
    st.sampled_from([SPLIT, Artifact.imported([FILE])]),
    st.lists(copies, min_size=len(MACHINES) * 2, max_size=len(MACHINES) * 2),
)
def test_placeable_iff_every_file_has_the_right_hash_and_full_size(
    artifact: Artifact, plan: list[tuple[str, str]]
) -> None:
    entries = []
    good: dict[str, bool] = {}
    downloaded_only: dict[str, bool] = {}
    for m_index, machine in enumerate(MACHINES):
        all_good = True
        all_downloaded = True
        for f_index, f in enumerate(artifact.files):
            presence, hashed = plan[m_index * 2 + f_index]
            if presence == "absent":
                all_good = all_downloaded = False
                continue
            present = {"partial": f.size_bytes - 1, "full": f.size_bytes}.get(
                presence, f.size_bytes + 1
            )
            computed = {"none": None, "right": f.sha256}.get(hashed, BAD)
            entries.append(entry(machine, f, present, computed))
            full, right = present == f.size_bytes, computed == f.sha256
            all_good = all_good and full and right
            all_downloaded = all_downloaded and full
        good[machine] = all_good
        downloaded_only[machine] = all_downloaded and not all_good
    cache = ModelCache(files=entries)
    placeable = placeable_machines(cache, artifact)
    assert placeable == frozenset(m for m in MACHINES if good[m])
    assert placeable.isdisjoint(m for m in MACHINES if downloaded_only[m])
    for machine in MACHINES:
        assert (cache.copy_state(machine, artifact) is CopyState.VERIFIED) is good[machine]
