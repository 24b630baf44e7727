"""A copy imported ``--no-register`` (a model registered on another machine, placed here)
answers to its artifact id on the machine that holds it: ``model verify``, ``model info``
and ``models rm`` find it by its id or a prefix, though no name points at it here."""

from __future__ import annotations

from pathlib import Path

from nodeau.domain.artifacts import Sha256
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli


def test_an_unnamed_copy_is_verified_inspected_and_removed_by_its_id(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    path = write_tiny_llama(tmp_path / "copy.gguf", seed=21)
    sha = Sha256.of_bytes(path.read_bytes()).hex
    assert cli("models", "import", str(path), "--no-register").returncode == 0

    verified = cli("model", "verify", sha[:12])
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.strip().endswith("verified")

    info = cli.json("model", "info", sha)
    assert isinstance(info, dict)
    assert info["artifact_id"] == sha and info["names"] == []
    assert info["summary"]["architecture"]["name"] == "llama"

    removed = cli("models", "rm", sha[:8])
    assert removed.returncode == 0, removed.stderr
    assert cli.json("model", "status") == []


def test_an_id_nothing_here_holds_is_still_unknown(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    done = cli("model", "verify", "ab" * 32)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
