"""Kill -9 during imports and fetches: nothing is ever verified unless its bytes hash right.

Each trial SIGKILLs tests/support/real/store_worker.py after a seeded random delay; a fresh store
on its root then lists nothing wrongly verified, holds no leftovers, and completes the operation.
"""

from __future__ import annotations

import hashlib
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.domain.artifacts import Sha256
from nodeau.domain.cache import CopyState
from tests.support.clock import ticking
from tests.support.real import store_worker

WORKER = Path(store_worker.__file__)
TRIALS_PER_MODE = 20
FILE_BYTES = 4 * 1024 * 1024
BOUND_S = 30  # no child may take longer than this to start, finish or die
SEED = 20260101


def start(root: Path, mode: str, source: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(root), mode, str(source)],
        stdout=subprocess.PIPE,
        bufsize=0,
    )


def wait_for_ready(child: subprocess.Popen[bytes]) -> None:
    assert child.stdout is not None
    readable, _, _ = select.select([child.stdout], [], [], BOUND_S)
    assert readable, "the worker did not start in time"
    assert child.stdout.readline() == b"ready\n"


def uninterrupted_seconds(tmp_path: Path, mode: str, source: Path) -> float:
    """How long the opening and the operation take when nothing interrupts them."""
    with start(tmp_path / f"calibrate-{mode}", mode, source) as child:
        wait_for_ready(child)
        out, _ = child.communicate(timeout=BOUND_S)
    assert child.returncode == 0
    words = out.decode().split()
    assert words[0] == "done"
    return float(words[1])


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_after_crash(root: Path, expected: Sha256) -> None:
    """A fresh store on the root trusts nothing that does not hash right."""
    with FilesystemModelStore(
        root, store_worker.MACHINE, reserve_bytes=0, clock=ticking()
    ) as store:
        assert list((root / "tmp").iterdir()) == []
        listed = store.files()
        assert {f.sha256 for f in listed} <= {expected}
        for file in listed:
            if file.verified:
                path = store.verified_path(file.sha256)
                assert path is not None
                assert sha256_of(path) == file.sha256.hex
        # and a file only ever has its final name once its bytes matched
        for blob in (root / "blobs" / "sha256").iterdir():
            assert sha256_of(blob) == blob.name


def check_rerun_completes(
    root: Path, mode: str, source: Path, expected: Sha256, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:
        if mode == "import-copy":
            patched.setattr(os, "link", store_worker.cross_device)
        assert store_worker.run(root, mode, source, ticking()) == expected
    with FilesystemModelStore(
        root, store_worker.MACHINE, reserve_bytes=0, clock=ticking()
    ) as store:
        (file,) = store.files()
        assert (file.sha256, file.state) == (expected, CopyState.VERIFIED)
        path = store.verified_path(expected)
        assert path is not None
        assert sha256_of(path) == expected.hex
        assert list((root / "partial").iterdir()) == []


@pytest.mark.slow
def test_kill_9_at_random_points_never_leaves_a_wrong_file_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(SEED)
    data = rng.randbytes(FILE_BYTES)
    source = tmp_path / "user" / "model.gguf"
    source.parent.mkdir()
    source.write_bytes(data)
    expected = Sha256.of_bytes(data)
    outcomes: Counter[tuple[str, str]] = Counter()
    for mode in store_worker.MODES:
        # Kill delays spread over the uninterrupted run's time, so kills land while the store
        # opens, hashes, copies or appends, and around the renames and index writes.
        span = 1.25 * uninterrupted_seconds(tmp_path, mode, source)
        for trial in range(TRIALS_PER_MODE):
            root = tmp_path / f"{mode}-{trial}"
            with start(root, mode, source) as child:
                try:
                    wait_for_ready(child)
                    # the delay only spreads the kill points; nothing asserts on time
                    time.sleep(rng.uniform(0, span))
                    child.send_signal(signal.SIGKILL)
                    out, _ = child.communicate(timeout=BOUND_S)
                finally:
                    child.kill()
            outcomes[(mode, "finished" if b"done" in out else "killed midway")] += 1
            check_after_crash(root, expected)
            check_rerun_completes(root, mode, source, expected, monkeypatch)
    assert sum(outcomes.values()) == len(store_worker.MODES) * TRIALS_PER_MODE == 60
    killed = sum(n for (_, outcome), n in outcomes.items() if outcome == "killed midway")
    assert killed > 0, f"no kill landed before an operation finished: {dict(outcomes)}"
    assert sha256_of(source) == expected.hex  # the user's file is untouched
    print(f"crash trials: {dict(outcomes)}")
