"""How the CLI prints: aligned tables for people, JSON for programs.

One private cattrs converter turns the domain's values into JSON: hashes as
hex, moments as ISO 8601, enums as their values, durations in seconds, fractions as n/d.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cattrs


@cache
def _converter() -> cattrs.Converter:
    """Built on first use, so commands that print no JSON never import cattrs."""
    from datetime import datetime, timedelta
    from fractions import Fraction
    from pathlib import Path

    import cattrs
    from cattrs.gen import make_dict_unstructure_fn, override

    from nodeau.domain.artifacts import Sha256
    from nodeau.domain.records import RunningServer

    converter = cattrs.Converter()
    converter.register_unstructure_hook(Sha256, lambda s: s.hex)
    converter.register_unstructure_hook(datetime, lambda d: d.isoformat())
    converter.register_unstructure_hook(timedelta, lambda d: d.total_seconds())
    converter.register_unstructure_hook(Fraction, lambda f: f"{f.numerator}/{f.denominator}")
    converter.register_unstructure_hook(Path, str)
    # a model server's key is for the endpoint alone: never in what a command prints
    converter.register_unstructure_hook(
        RunningServer,
        make_dict_unstructure_fn(RunningServer, converter, api_key=override(omit=True)),
    )
    return converter


def to_json(value: Any) -> str:
    """A JSON document of a value (attrs classes, tuples, dicts, enums)."""
    return json.dumps(_converter().unstructure(value), indent=2, sort_keys=False)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned with two spaces between them; an empty table still shows its header."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def size(n: int) -> str:
    """Bytes in the largest binary unit that keeps a number of at least one."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    return f"{n} B" if unit == 0 else f"{value:.2f} {units[unit]}"
