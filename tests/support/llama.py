"""The llama-server the tests run: found as the product finds it, and a failure (never a
skip) when there is none, under CI=true and elsewhere alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodeau.adapters.llama_server import find_llama_server

BUILD_HOW = (
    "no llama-server found: run `nodeau server install --cpu` (about 10 minutes on 2 cores), "
    "put llama-server on PATH, or set NODEAU_LLAMA_SERVER"
)


def llama_server_binary() -> Path:
    """The llama-server binary; fails the test when there is none."""
    found = find_llama_server(os.environ)
    if found is None or not found.is_file():
        chosen = f" ({found} is not a file)" if found else ""
        pytest.fail(f"{BUILD_HOW}{chosen}; CI={os.environ.get('CI', '')!r}")
    return found
