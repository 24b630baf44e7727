"""Shapes that cannot be are refused with a sentence written out here whole: an artifact
without files or with an absolute path, an architecture no GGUF file declares, a colour
no PNG holds; and at their bounds the shapes that can be are kept (a solid PNG, a
sliding window on every layer, evidence exactly as long as the limit)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from PIL import Image

from nodeau.domain.artifacts import canonical_files, relative_path_problem
from nodeau.domain.memory import Architecture
from nodeau.domain.probes.common import clip
from nodeau.domain.probes.png import solid_png


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def test_an_artifact_has_at_least_one_file() -> None:
    with pytest.raises(ValueError, match=exactly("an artifact has at least one file")):
        canonical_files([])


@pytest.mark.parametrize("path", ["c:/models/a.gguf", "C:a.gguf", "/models/a.gguf"])
def test_a_path_with_a_drive_or_a_root_is_absolute(path: str) -> None:
    assert relative_path_problem(path) == f"a file path must be relative, not absolute: {path!r}"


def architecture(**changes: Any) -> Architecture:
    fields: dict[str, Any] = {
        "name": "llama",
        "n_layers": 4,
        "n_embd": 64,
        "n_head": 8,
        "n_head_kv": 8,
        "key_length": 8,
        "value_length": 8,
        "n_vocab": 100,
        "context_length": 2048,
    }
    fields.update(changes)
    return Architecture(**fields)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_head_kv": 9}, "9 KV heads is more than 8 heads"),
        ({"swa_layers": 5, "sliding_window": 512}, "5 sliding-window layers of 4"),
        ({"swa_layers": 2}, "2 sliding-window layers without a window"),
        ({"n_expert": 2, "n_expert_used": 3}, "3 experts used of 2"),
    ],
)
def test_an_architecture_no_file_declares_is_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        architecture(**changes)


def test_a_sliding_window_on_every_layer_is_an_architecture() -> None:
    assert architecture(swa_layers=4, sliding_window=512).swa_layers == 4


def test_a_solid_png_is_32_pixels_square_by_default() -> None:
    image = Image.open(io.BytesIO(solid_png((255, 0, 0))))
    assert (image.format, image.mode, image.size) == ("PNG", "RGB", (32, 32))
    assert image.getpixel((31, 31)) == (255, 0, 0)


@pytest.mark.parametrize(("rgb", "size"), [((256, 0, 0), 32), ((0, -1, 0), 32), ((0, 0, 0), 0)])
def test_a_colour_or_size_no_png_holds_is_refused(rgb: tuple[int, int, int], size: int) -> None:
    with pytest.raises(ValueError, match=exactly(f"not a colour or size: {rgb}, {size}")):
        solid_png(rgb, size)


def test_evidence_exactly_as_long_as_the_limit_is_kept_whole() -> None:
    assert clip("a" * 300) == "a" * 300
    assert clip("a" * 301) == "a" * 299 + "…"
