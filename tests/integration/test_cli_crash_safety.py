"""kill -9 during ``nodeau models pull`` and ``nodeau models import``: nothing lies afterwards.

After a SIGKILL at a seeded random moment, every file ``nodeau model status`` calls verified
hashes right, and running the same command again completes with a verified copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodeau.adapters.catalog_file import catalog_json
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.tasks import Task
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.publisher import local_publisher

NODEAU = Path(sys.executable).parent / "nodeau"
REVISION = "89abcdef0123456789abcdef0123456789abcdef"
TRIALS_PER_COMMAND = 25
PAYLOAD_MIB = 24


def env_for(home: Path, catalog: Path, url: str) -> dict[str, str]:
    return {
        **os.environ,
        "NODEAU_HOME": str(home),
        "NODEAU_CATALOG": str(catalog),
        "NODEAU_PUBLISHER_URL": url,
        "NODEAU_MACHINE": "crashbox",
        "NODEAU_DISK_RESERVE_BYTES": "0",
    }


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODEAU), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def killed_after(args: list[str], env: dict[str, str], delay: float) -> bool:
    """Start the command, SIGKILL it after ``delay`` s; True if it was still running."""
    proc = subprocess.Popen(
        [str(NODEAU), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        return True


def verified_files_hash_right(home: Path, env: dict[str, str]) -> int:
    """Check every verified row against the bytes on disk; returns how many were verified."""
    done = run(["model", "status", "--json"], env)
    assert done.returncode == 0, done.stderr
    count = 0
    for row in json.loads(done.stdout):
        if str(row["verified"]).startswith("yes"):
            blob = home / "models" / "blobs" / "sha256" / row["sha256"]
            digest = hashlib.sha256(blob.read_bytes()).hexdigest()
            assert digest == row["sha256"], f"{blob} is called verified but hashes to {digest}"
            count += 1
    return count


def big_model(path: Path) -> bytes:
    """A real GGUF header and tensors, padded at the end so a kill can land mid-transfer."""
    write_tiny_llama(path, seed=11)
    data = path.read_bytes() + random.Random(5).randbytes(PAYLOAD_MIB * 1024 * 1024)
    path.write_bytes(data)
    return data


@pytest.mark.slow
def test_kill_minus_nine_during_pull_and_import(tmp_path: Path) -> None:
    source = tmp_path / "model.gguf"
    data = big_model(source)
    sha = Sha256.of_bytes(data)
    file = ArtifactFile(path="model.gguf", size_bytes=len(data), sha256=sha)
    entry = CatalogEntry(
        entry=CuratedEntry(
            name="crashy", publisher="tests", repo="tests/crashy", revision=REVISION, files=(file,)
        ),
        summary=ArchitectureSummary(
            architecture="llama", parameters="tiny", context_length=256, quantisation="F32"
        ),
        tasks=(Task.CHAT,),
    )
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_json(Catalog(entries=(entry,))))
    rng = random.Random(20261129)
    trials = 0
    interrupted = 0
    with local_publisher() as publisher:
        publisher.serve(f"/tests/crashy/resolve/{REVISION}/model.gguf", source)
        commands = {
            "pull": ["models", "pull", "crashy"],
            "import": ["models", "import", str(source), "--alias", "crashy-local"],
        }
        for name, args in commands.items():
            # how long one uninterrupted run takes, so the kills spread over all of it
            home = tmp_path / f"{name}-timing"
            env = env_for(home, catalog, publisher.base_url)
            started = time.monotonic()
            assert run(args, env).returncode == 0
            full = time.monotonic() - started
            for trial in range(TRIALS_PER_COMMAND):
                home = tmp_path / f"{name}-{trial}"
                env = env_for(home, catalog, publisher.base_url)
                # some trials kill a second attempt that resumes what the first left
                if trial % 5 == 4:
                    killed_after(args, env, rng.uniform(0.0, full))
                interrupted += killed_after(args, env, rng.uniform(0.0, full * 1.25))
                trials += 1
                verified_files_hash_right(home, env)
                again = run(args, env)
                assert again.returncode == 0, again.stderr
                assert verified_files_hash_right(home, env) == 1
    assert trials == 2 * TRIALS_PER_COMMAND
    assert interrupted >= TRIALS_PER_COMMAND  # most kills landed while the command ran
