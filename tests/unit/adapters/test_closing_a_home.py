"""Closing NODEAU_HOME to other users: what is changed, what is left, and the process umask.

Real folders under pytest's tmp_path; each test sets the umask back (the process's own is
shared by every test in it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeau.adapters.private_files import (
    close_home,
    keep_private,
    private_files,
    write_private,
)


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """Every test starts under umask 022 and leaves the process's umask as it found it."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def old_home(tmp_path: Path) -> Path:
    """A home as Nodeau left it before its files were private: 0755 folders, 0644 files,
    read-only model blobs."""
    home = tmp_path / "home"
    for folder in ("batches/job1", "logs", "dashboard", "models/blobs/sha256"):
        (home / folder).mkdir(parents=True)
    for file in ("batches/job1/requests.jsonl", "batches/job1/results.jsonl", "logs/job1.log"):
        (home / file).write_text("prompt and answer\n")
    (home / "state.sqlite3").write_bytes(b"ledger")
    (home / "dashboard" / "token").write_text("t")
    (home / "dashboard" / "token").chmod(0o600)
    blob = home / "models" / "blobs" / "sha256" / "ab"
    blob.write_bytes(b"weights")
    blob.chmod(0o444)
    return home


def test_a_home_open_to_others_is_closed_with_everything_in_it_but_the_model_cache(
    tmp_path: Path,
) -> None:
    home = old_home(tmp_path)
    close_home(home)
    found = {str(p.relative_to(home)): mode(p) for p in sorted(home.rglob("*"))}
    assert mode(home) == 0o700
    assert found == {
        "batches": 0o700,
        "batches/job1": 0o700,
        "batches/job1/requests.jsonl": 0o600,
        "batches/job1/results.jsonl": 0o600,
        "dashboard": 0o700,
        "dashboard/token": 0o600,
        "logs": 0o700,
        "logs/job1.log": 0o600,
        "models": 0o755,  # shared, nothing secret: as it was
        "models/blobs": 0o755,
        "models/blobs/sha256": 0o755,
        "models/blobs/sha256/ab": 0o444,
        "state.sqlite3": 0o600,
    }


def test_a_link_in_the_home_is_not_followed(tmp_path: Path) -> None:
    home = old_home(tmp_path)
    outside = tmp_path / "the users own notes.txt"
    outside.write_text("not Nodeau's")
    (home / "notes").symlink_to(outside)
    (home / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    close_home(home)
    assert (mode(outside), mode(tmp_path / "home")) == (0o644, 0o700)


def test_a_home_already_closed_is_not_walked_again(tmp_path: Path) -> None:
    """Closing is done once: a home of 0700 costs one stat, and a file inside it that some
    other program wrote 0644 stays so (nobody else can reach it)."""
    home = old_home(tmp_path)
    home.chmod(0o700)
    close_home(home)
    assert mode(home / "batches" / "job1" / "requests.jsonl") == 0o644


def test_a_missing_home_is_not_created(tmp_path: Path) -> None:
    close_home(tmp_path / "not yet")
    assert not (tmp_path / "not yet").exists()


def test_a_shared_folder_a_users_home_folder_and_one_not_ours_are_left_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: everyone's
    above = tmp_path / "home-folders"
    user_home = above / "user"
    (user_home / ".local").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    for folder in (shared, user_home, above):
        assert mode(folder) & 0o077
        before = mode(folder)
        close_home(folder)
        assert mode(folder) == before
    assert mode(user_home / ".local") == 0o755

    theirs = old_home(tmp_path / "theirs")
    owner = theirs.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    close_home(theirs)
    assert mode(theirs) == 0o755


def test_keep_private_sets_umask_077_and_private_files_gives_the_old_one_back(
    tmp_path: Path,
) -> None:
    home = old_home(tmp_path)
    with private_files(home):
        (home / "new.log").write_text("x")
        (home / "new").mkdir()
    assert (mode(home), mode(home / "new.log"), mode(home / "new")) == (0o700, 0o600, 0o700)
    assert os.umask(0o022) == 0o022  # given back
    assert keep_private(None) == 0o022
    assert os.umask(0o022) == 0o077


def test_write_private_makes_a_file_there_before_0600(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text("a longer old content\n")
    write_private(path, b"new\n")
    assert (path.read_bytes(), mode(path)) == (b"new\n", 0o600)
