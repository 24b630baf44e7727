"""A solid-colour PNG, drawn in memory with Pillow."""

from __future__ import annotations

import io

from PIL import Image


def solid_png(rgb: tuple[int, int, int], size: int = 32) -> bytes:
    """A ``size`` x ``size`` 8-bit RGB PNG of one colour."""
    if not all(0 <= c <= 255 for c in rgb) or size < 1:
        raise ValueError(f"not a colour or size: {rgb}, {size}")
    encoded = io.BytesIO()
    Image.new("RGB", (size, size), rgb).save(encoded, format="PNG")
    return encoded.getvalue()
