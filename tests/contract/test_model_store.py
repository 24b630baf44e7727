"""The ModelStore contract, run against the file-system store and the in-memory fake alike.

The tests after the contract section hold only for real files: links, copies,
modes, the reserve, locks between processes and what a reopened root trusts.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import pytest

from nodeau.adapters.fs_store import WAIT_MESSAGE, FilesystemModelStore
from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.domain.cache import CachedFile, CopyState
from nodeau.ports.models import (
    ChecksumMismatch,
    DiskReserveError,
    ModelFileError,
    ModelStore,
)
from tests.support.clock import Clock, ticking
from tests.support.fakes.fakes import FakeDisk, FakeModelStore

MACHINE = "m1"
START = datetime(2026, 1, 1, tzinfo=UTC)  # the stores' clock: one second a call
SIZE = 96 * 1024
BOUND_S = 30  # no wait in these tests may last longer


def model_bytes(tag: str, size: int = SIZE) -> bytes:
    """Bytes that differ for every tag."""
    block = hashlib.sha256(tag.encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def source(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / "user" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def expecting(data: bytes) -> ArtifactFile:
    return ArtifactFile(path="model.gguf", size_bytes=len(data), sha256=Sha256.of_bytes(data))


class Harness(Protocol):
    clock: Clock[datetime]

    def open(self) -> ModelStore:
        """A new store on the same disk: another process, or the same one after a restart."""
        ...

    def overwrite(self, sha256: Sha256, data: bytes) -> None: ...

    def append(self, sha256: Sha256, data: bytes) -> None: ...

    def touch(self, sha256: Sha256) -> None: ...


class FilesystemHarness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = ticking(START)
        self.opened: list[FilesystemModelStore] = []

    def open(self) -> FilesystemModelStore:
        store = FilesystemModelStore(self.root, MACHINE, reserve_bytes=0, clock=self.clock)
        self.opened.append(store)
        return store

    def blob(self, sha256: Sha256) -> Path:
        return self.root / "blobs" / "sha256" / sha256.hex

    def overwrite(self, sha256: Sha256, data: bytes) -> None:
        self.blob(sha256).chmod(0o644)
        with self.blob(sha256).open("r+b") as file:
            file.write(data)

    def append(self, sha256: Sha256, data: bytes) -> None:
        self.blob(sha256).chmod(0o644)
        with self.blob(sha256).open("ab") as file:
            file.write(data)

    def touch(self, sha256: Sha256) -> None:
        held = self.blob(sha256).stat()
        os.utime(self.blob(sha256), ns=(held.st_atime_ns, held.st_mtime_ns + 1_000_000_000))

    def close(self) -> None:
        for store in self.opened:
            store.close()


class FakeHarness:
    def __init__(self, folder: Path) -> None:
        self.disk = FakeDisk(folder)
        self.clock = ticking(START)

    def open(self) -> ModelStore:
        return FakeModelStore(MACHINE, disk=self.disk, clock=self.clock)

    def overwrite(self, sha256: Sha256, data: bytes) -> None:
        self.disk.overwrite(sha256, data)

    def append(self, sha256: Sha256, data: bytes) -> None:
        self.disk.append(sha256, data)

    def touch(self, sha256: Sha256) -> None:
        self.disk.touch(sha256)


@pytest.fixture(params=["filesystem", "fake"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "filesystem":
        real = FilesystemHarness(tmp_path / "cache")
        yield real
        real.close()
    else:
        yield FakeHarness(tmp_path / "fake")


def verified_entry(data: bytes, at: timedelta) -> CachedFile:
    sha = Sha256.of_bytes(data)
    return CachedFile(
        machine=MACHINE,
        sha256=sha,
        size_bytes=len(data),
        bytes_present=len(data),
        computed_sha256=sha,
        verified_at=START + at,
    )


# -- the contract: both stores ---------------------------------------------


def test_an_imported_file_is_listed_verified(harness: Harness, tmp_path: Path) -> None:
    data = model_bytes("a")
    store = harness.open()
    imported = store.import_file(source(tmp_path, "a.gguf", data))
    assert (imported.sha256, imported.size_bytes) == (Sha256.of_bytes(data), len(data))
    assert store.files() == (verified_entry(data, timedelta(0)),)
    assert store.files()[0].state is CopyState.VERIFIED
    assert store.verified_path(imported.sha256) == imported.path
    assert store.machine == MACHINE


def test_the_same_bytes_imported_twice_are_one_unchanged_entry(
    harness: Harness, tmp_path: Path
) -> None:
    data = model_bytes("a")
    store = harness.open()
    first = store.import_file(source(tmp_path, "a.gguf", data))
    again = store.import_file(source(tmp_path, "copy-of-a.gguf", data))
    assert (again.sha256, again.path) == (first.sha256, first.path)
    # one entry, still checked at the first import's time: nothing was redone
    assert store.files() == (verified_entry(data, timedelta(0)),)


def test_different_bytes_are_two_entries(harness: Harness, tmp_path: Path) -> None:
    a, b = model_bytes("a"), model_bytes("b")
    store = harness.open()
    store.import_file(source(tmp_path, "a.gguf", a))
    store.import_file(source(tmp_path, "b.gguf", b))
    listed = {f.sha256: f for f in store.files()}
    assert set(listed) == {Sha256.of_bytes(a), Sha256.of_bytes(b)}
    assert all(f.state is CopyState.VERIFIED for f in listed.values())


def test_verify_after_an_in_place_change_records_a_mismatch(
    harness: Harness, tmp_path: Path
) -> None:
    data, changed = model_bytes("a"), model_bytes("changed")
    store = harness.open()
    sha = store.import_file(source(tmp_path, "a.gguf", data)).sha256
    harness.overwrite(sha, changed)
    result = store.verify(sha)
    assert result == CachedFile(
        machine=MACHINE,
        sha256=sha,
        size_bytes=len(data),
        bytes_present=len(data),
        computed_sha256=Sha256.of_bytes(changed),
        verified_at=START + timedelta(seconds=1),
    )
    assert result.state is CopyState.MISMATCH
    assert store.files() == (result,)  # recorded and shown, not dropped
    assert store.verified_path(sha) is None
    assert harness.open().files() == (result,)


def test_a_touched_file_drops_out_of_verified_before_any_reverify(
    harness: Harness, tmp_path: Path
) -> None:
    data = model_bytes("a")
    store = harness.open()
    sha = store.import_file(source(tmp_path, "a.gguf", data)).sha256
    harness.touch(sha)
    listed = store.files()
    assert listed == (
        CachedFile(machine=MACHINE, sha256=sha, size_bytes=len(data), bytes_present=len(data)),
    )
    assert listed[0].state is CopyState.DOWNLOADED
    assert store.verified_path(sha) is None
    # re-reading the unchanged bytes verifies the file again
    assert store.verify(sha) == verified_entry(data, timedelta(seconds=1))
    assert store.verified_path(sha) is not None


def test_importing_a_file_that_dropped_out_of_verified_verifies_it_again(
    harness: Harness, tmp_path: Path
) -> None:
    data = model_bytes("a")
    path = source(tmp_path, "a.gguf", data)
    store = harness.open()
    sha = store.import_file(path).sha256
    harness.touch(sha)
    assert not store.files()[0].verified
    again = store.import_file(path)
    assert store.files() == (verified_entry(data, timedelta(seconds=1)),)
    assert store.verified_path(sha) == again.path


def test_an_appended_file_drops_out_of_verified_and_verifies_as_a_mismatch(
    harness: Harness, tmp_path: Path
) -> None:
    data = model_bytes("a")
    store = harness.open()
    sha = store.import_file(source(tmp_path, "a.gguf", data)).sha256
    harness.append(sha, b"tail")
    listed = store.files()
    assert listed == (
        CachedFile(machine=MACHINE, sha256=sha, size_bytes=len(data), bytes_present=len(data) + 4),
    )
    assert listed[0].state is CopyState.MISMATCH
    result = store.verify(sha)
    assert result.computed_sha256 == Sha256.of_bytes(data + b"tail")
    assert (result.state, result.verified) == (CopyState.MISMATCH, False)


def test_a_fetch_resumes_from_its_partial_and_commits(harness: Harness) -> None:
    data = model_bytes("fetched")
    expected = expecting(data)
    store = harness.open()
    started = store.partial(expected)
    assert started.bytes_present == 0
    with started.path.open("ab") as file:
        file.write(data[:1000])
    # listed as downloading, by another process too, and resumed where it stopped
    assert store.files() == (
        CachedFile(
            machine=MACHINE, sha256=expected.sha256, size_bytes=len(data), bytes_present=1000
        ),
    )
    assert store.files()[0].state is CopyState.PARTIAL
    resumed = harness.open().partial(expected)
    assert (resumed.path, resumed.bytes_present) == (started.path, 1000)
    assert store.verified_path(expected.sha256) is None
    with resumed.path.open("ab") as file:
        file.write(data[1000:])
    committed = store.commit(expected, Sha256.of_bytes(data))
    assert committed == verified_entry(data, timedelta(0))
    assert store.files() == (committed,)
    assert store.verified_path(expected.sha256) is not None


@pytest.mark.parametrize("wrong", ["hash", "size"])
def test_a_commit_of_the_wrong_bytes_is_discarded_and_nothing_is_verified(
    harness: Harness, wrong: str
) -> None:
    data = model_bytes("expected")
    expected = expecting(data)
    store = harness.open()
    partial = store.partial(expected)
    got = model_bytes("other") if wrong == "hash" else data[:-1]
    partial.path.write_bytes(got)
    claimed = Sha256.of_bytes(got) if wrong == "hash" else expected.sha256
    with pytest.raises(ChecksumMismatch) as caught:
        store.commit(expected, claimed)
    assert (caught.value.expected, caught.value.computed) == (expected.sha256, claimed)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("model.gguf: wrong bytes")
    assert not any(f.verified for f in store.files())
    assert store.verified_path(expected.sha256) is None
    assert store.partial(expected).bytes_present == 0  # the wrong bytes are gone


def test_a_reopened_store_keeps_its_facts(harness: Harness, tmp_path: Path) -> None:
    good, damaged, fetching = model_bytes("good"), model_bytes("damaged"), model_bytes("fetching")
    store = harness.open()
    store.import_file(source(tmp_path, "good.gguf", good))
    sha = store.import_file(source(tmp_path, "damaged.gguf", damaged)).sha256
    harness.overwrite(sha, good)
    store.verify(sha)
    partial = store.partial(expecting(fetching))
    partial.path.write_bytes(fetching[:500])
    before = store.files()
    assert sorted(f.state for f in before) == sorted(
        [CopyState.VERIFIED, CopyState.MISMATCH, CopyState.PARTIAL]
    )
    assert harness.open().files() == before


def test_verify_of_a_file_not_held_names_it(harness: Harness) -> None:
    unknown = Sha256.of_bytes(b"never stored")
    store = harness.open()
    with pytest.raises(ModelFileError, match=unknown.hex):
        store.verify(unknown)
    store.partial(expecting(b"only partly here"))
    with pytest.raises(ModelFileError, match="no complete copy"):
        store.verify(Sha256.of_bytes(b"only partly here"))


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: None, "no such file"),
        (lambda p: p.write_bytes(b""), "is empty"),
    ],
)
def test_import_refuses_what_is_not_a_model_file(
    harness: Harness, tmp_path: Path, make: object, problem: str
) -> None:
    path = tmp_path / "not-a-model"
    make(path)  # type: ignore[operator]
    store = harness.open()
    with pytest.raises(ModelFileError) as caught:
        store.import_file(path)
    assert str(caught.value) == f"{path}: {caught.value.problem}"
    assert caught.value.problem.startswith(problem)
    assert store.files() == ()


def test_a_second_fetch_waits_and_says_so(harness: Harness) -> None:
    holder, waiter = harness.open(), harness.open()
    said: list[str] = []
    waiting, acquired = threading.Event(), threading.Event()

    def on_wait(sentence: str) -> None:
        said.append(sentence)
        waiting.set()

    def second_fetch() -> None:
        with waiter.exclusive_fetch(on_wait):
            acquired.set()

    with holder.exclusive_fetch(pytest.fail):
        thread = threading.Thread(target=second_fetch, daemon=True)
        thread.start()
        assert waiting.wait(BOUND_S)
        assert not acquired.is_set()  # the holder still holds it
    thread.join(BOUND_S)
    assert acquired.is_set()
    assert said == [WAIT_MESSAGE]
    with waiter.exclusive_fetch(pytest.fail):  # free again: no wait, no sentence
        assert said == [WAIT_MESSAGE]


def test_a_removed_file_is_gone_from_every_listing(harness: Harness, tmp_path: Path) -> None:
    kept, gone = model_bytes("kept"), model_bytes("gone")
    store = harness.open()
    store.import_file(source(tmp_path, "kept.gguf", kept))
    sha = store.import_file(source(tmp_path, "gone.gguf", gone)).sha256
    assert store.remove(sha) == len(gone)
    assert store.verified_path(sha) is None
    assert [f.sha256 for f in store.files()] == [Sha256.of_bytes(kept)]
    assert [f.sha256 for f in harness.open().files()] == [Sha256.of_bytes(kept)]
    assert store.remove(sha) == 0  # nothing held: nothing freed, no error


def test_removing_a_fetch_in_progress_forgets_its_bytes(harness: Harness) -> None:
    data = model_bytes("fetched")
    expected = expecting(data)
    store = harness.open()
    with store.partial(expected).path.open("ab") as file:
        file.write(data[:1000])
    assert store.remove(expected.sha256) == 1000
    assert store.files() == ()
    assert store.partial(expected).bytes_present == 0


def test_an_import_tells_its_progress_to_the_last_byte(harness: Harness, tmp_path: Path) -> None:
    data = model_bytes("a")
    told: list[tuple[str, int, int]] = []
    harness.open().import_file(source(tmp_path, "a.gguf", data), lambda *step: told.append(step))
    assert told[-1][1:] == (len(data), len(data))
    assert told[0][0] == "hashing"
    assert all(0 < done <= total == len(data) for _, done, total in told)


# -- the file-system store only --------------------------------------------


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[FilesystemHarness]:
    real = FilesystemHarness(tmp_path / "cache")
    yield real
    real.close()


def test_import_links_and_leaves_the_users_file_untouched(
    fs: FilesystemHarness, tmp_path: Path
) -> None:
    data = model_bytes("a")
    path = source(tmp_path, "a.gguf", data)
    before = path.stat()
    imported = fs.open().import_file(path)
    after = path.stat()
    assert path.read_bytes() == data
    kept = (before.st_ino, before.st_size, before.st_mtime_ns, before.st_mode)
    assert (after.st_ino, after.st_size, after.st_mtime_ns, after.st_mode) == kept
    assert imported.linked
    assert imported.path.stat().st_ino == before.st_ino


def test_relinking_the_file_already_linked_leaves_nothing_behind(
    fs: FilesystemHarness, tmp_path: Path
) -> None:
    path = source(tmp_path, "a.gguf", model_bytes("a"))
    store = fs.open()
    sha = store.import_file(path).sha256
    fs.touch(sha)  # the user's file, and so the linked copy, was touched
    again = store.import_file(path)  # a rename onto a link to the same inode changes nothing
    assert again.linked
    assert again.path.stat().st_ino == path.stat().st_ino
    assert store.verified_path(sha) == again.path
    assert list((fs.root / "tmp").iterdir()) == []


def cross_device(*_args: object, **_kwargs: object) -> None:
    """``os.link`` as it fails when the cache is on another file system."""
    raise OSError(errno.EXDEV, "Invalid cross-device link")


def test_import_copies_when_linking_fails(
    fs: FilesystemHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "link", cross_device)
    data = model_bytes("a")
    path = source(tmp_path, "a.gguf", data)
    before = path.stat()
    store = fs.open()
    imported = store.import_file(path)
    assert not imported.linked
    held = imported.path.stat()
    assert held.st_ino != before.st_ino
    assert held.st_mode & 0o777 == 0o444
    assert hashlib.sha256(imported.path.read_bytes()).hexdigest() == imported.sha256.hex
    assert (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes()) == (
        before.st_ino,
        before.st_mtime_ns,
        data,
    )
    assert store.files() == (verified_entry(data, timedelta(0)),)
    assert list((fs.root / "tmp").iterdir()) == []


def test_removing_a_linked_import_leaves_the_users_file(
    fs: FilesystemHarness, tmp_path: Path
) -> None:
    data = model_bytes("a")
    path = source(tmp_path, "a.gguf", data)
    store = fs.open()
    imported = store.import_file(path)
    assert imported.linked
    store.remove(imported.sha256)
    assert not imported.path.exists()
    assert path.read_bytes() == data


def test_an_import_that_copies_tells_both_steps(
    fs: FilesystemHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "link", cross_device)
    data = model_bytes("a")
    told: list[tuple[str, int, int]] = []
    fs.open().import_file(source(tmp_path, "a.gguf", data), lambda *step: told.append(step))
    assert [t for t in told if t[1] == len(data)] == [
        ("hashing", len(data), len(data)),
        ("copying", len(data), len(data)),
    ]


def test_a_copy_that_would_eat_into_the_reserve_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    reserve = shutil.disk_usage(root).free + (1 << 40)
    path = source(tmp_path, "a.gguf", model_bytes("a"))
    with FilesystemModelStore(root, MACHINE, reserve_bytes=reserve, clock=ticking()) as store:
        assert store.free_bytes() < 0
        with monkeypatch.context() as patched:
            patched.setattr(os, "link", cross_device)
            with pytest.raises(DiskReserveError) as caught:
                store.import_file(path)
        assert str(caught.value).startswith(f"{path}: a copy needs {SIZE} bytes")
        assert "\n" not in str(caught.value)
        assert store.files() == ()
        assert list((root / "tmp").iterdir()) == []
        assert list((root / "blobs" / "sha256").iterdir()) == []
        # a hard link takes no space, so the reserve does not stop it
        assert store.import_file(path).linked


def test_import_refuses_a_fifo_without_waiting_for_a_writer(
    fs: FilesystemHarness, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ModelFileError, match="is not a regular file"):
        fs.open().import_file(fifo)


def test_reopening_trusts_no_check_whose_file_is_not_the_one_checked(
    fs: FilesystemHarness, tmp_path: Path
) -> None:
    same, gone = model_bytes("same"), model_bytes("gone")
    store = fs.open()
    kept = store.import_file(source(tmp_path, "same.gguf", same)).sha256
    lost = store.import_file(source(tmp_path, "gone.gguf", gone)).sha256
    # the same bytes in a new file (a new inode), and a file deleted behind the store's back
    replacement = tmp_path / "replacement"
    replacement.write_bytes(same)
    os.replace(replacement, fs.blob(kept))
    fs.blob(lost).unlink()
    listed = {f.sha256: f for f in fs.open().files()}
    assert listed[kept].state is CopyState.DOWNLOADED
    assert listed[lost].state is CopyState.MISSING
    with pytest.raises(ModelFileError):
        store.verify(lost)
    assert store.verify(kept).state is CopyState.VERIFIED


def test_a_dropped_check_stays_dropped_when_the_time_is_put_back(
    fs: FilesystemHarness, tmp_path: Path
) -> None:
    store = fs.open()
    sha = store.import_file(source(tmp_path, "a.gguf", model_bytes("a"))).sha256
    held = fs.blob(sha).stat()
    fs.touch(sha)
    assert not store.files()[0].verified
    os.utime(fs.blob(sha), ns=(held.st_atime_ns, held.st_mtime_ns))
    assert not store.files()[0].verified
    assert not fs.open().files()[0].verified


def test_opening_removes_leftovers_and_lists_an_unrecorded_file_unverified(
    fs: FilesystemHarness,
) -> None:
    fs.open().close()
    (fs.root / "tmp" / "interrupted-import").write_bytes(b"half")
    data = model_bytes("renamed before its row")
    orphan = fs.root / "blobs" / "sha256" / Sha256.of_bytes(data).hex
    orphan.write_bytes(data)
    store = fs.open()
    assert list((fs.root / "tmp").iterdir()) == []
    assert store.files() == (
        CachedFile(
            machine=MACHINE,
            sha256=Sha256.of_bytes(data),
            size_bytes=len(data),
            bytes_present=len(data),
        ),
    )
    assert store.verify(Sha256.of_bytes(data)).state is CopyState.VERIFIED


def test_the_fetch_lock_holds_between_processes(fs: FilesystemHarness) -> None:
    fs.open().close()
    holder_code = (
        "import fcntl, sys\n"
        f"lock = open({str(fs.root / 'fetch.lock')!r}, 'a')\n"
        "fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", holder_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline() == "held\n"
            said: list[str] = []
            waiting, acquired = threading.Event(), threading.Event()
            store = fs.open()

            def fetch() -> None:
                def on_wait(sentence: str) -> None:
                    said.append(sentence)
                    waiting.set()

                with store.exclusive_fetch(on_wait):
                    acquired.set()

            thread = threading.Thread(target=fetch, daemon=True)
            thread.start()
            assert waiting.wait(BOUND_S)
            assert not acquired.is_set()
            holder.stdin.write("done\n")
            holder.stdin.flush()
            thread.join(BOUND_S)
            assert acquired.is_set()
            assert said == [WAIT_MESSAGE]
        finally:
            holder.kill()
