"""A file Nodeau rewrites (``replace_whole``) is the new bytes or the old, mode 0600 whatever
the umask, and a write that fails leaves the old file and nothing beside it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nodeau.adapters.private_files import replace_whole, written_beside


def test_the_new_bytes_replace_the_old_and_nothing_is_left_beside(tmp_path: Path) -> None:
    path = tmp_path / "home" / "catalog.json"
    replace_whole(path, b"old")
    replace_whole(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in path.parent.iterdir()] == ["catalog.json"]


def test_it_is_private_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "token"
    previous = os.umask(0o022)
    try:
        replace_whole(path, b"secret")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_rename_that_fails_keeps_the_old_file_and_no_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "entitlement.json"
    path.write_bytes(b"old")

    def refused(source: object, target: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(OSError, match="No space left"):
        replace_whole(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["entitlement.json"]


def test_a_write_that_fails_leaves_nothing_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", refused)
    with pytest.raises(OSError, match="Input/output error"):
        written_beside(tmp_path / "installation-id", b"id")
    assert list(tmp_path.iterdir()) == []
