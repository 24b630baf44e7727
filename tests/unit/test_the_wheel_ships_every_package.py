"""The wheel lists its packages by name (pyproject.toml): a new package under domain/,
ports/, adapters/ or apps/ that is not listed would be left out of an installed Nodeau."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_folder_with_an_init_is_a_listed_package() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for name, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            inner = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *inner)))
    assert "nodeau.apps.recovery" in found
    assert found == listed, (sorted(found - listed), sorted(listed - found))
