"""The seeds of the GGUF fuzz: two valid tiny models, written once per module."""

from __future__ import annotations

import pytest

from tests.support.builders.gguf_outcomes import Seed


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seed, ...]:
    folder = tmp_path_factory.mktemp("seeds")
    return (
        Seed(
            folder / "q8.gguf", n_layers=1, n_embd=32, n_head=2, n_head_kv=1, n_ff=32, quant="q8_0"
        ),
        Seed(
            folder / "f16.gguf",
            n_layers=2,
            n_embd=32,
            n_head=4,
            n_head_kv=2,
            n_ff=64,
            quant="f16",
            tokenizer=False,
        ),
    )
