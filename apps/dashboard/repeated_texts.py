"""A long text repeated in the board's tables is sent once.

Why it is so: docs/adr/decisions/apps-dashboard.md (repeated_texts.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

SHORTEST = 24  # shorter texts cost about as much as their index
TEXTS = "texts"
ROWS = "rows"
AS_IS = "cli"

Json = dict[str, Any]


def _tables(document: Any) -> Iterator[list[Any]]:
    """Every table's ``rows`` in the document, however deep."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key == AS_IS:
                continue
            if key == ROWS and isinstance(value, list):
                yield value
            else:
                yield from _tables(value)
    elif isinstance(document, list):
        for value in document:
            yield from _tables(value)


def compacted(document: Json) -> Json:
    """``document`` with each long text repeated in its tables kept once, in ``texts``.

    The document is changed in place (it was made for this answer) and returned."""
    counts: Counter[str] = Counter()
    tables = list(_tables(document))
    for rows in tables:
        for row in rows:
            for cell in row:
                if not isinstance(cell, str):
                    raise TypeError(f"a table cell must be text, not {cell!r}")
                if len(cell) >= SHORTEST:
                    counts[cell] += 1
    shared = [text for text, n in counts.items() if n > 1]
    index = {text: i for i, text in enumerate(shared)}
    for rows in tables:
        for r, row in enumerate(rows):
            rows[r] = [index.get(cell, cell) for cell in row]
    document[TEXTS] = shared
    return document


def expanded(document: Json) -> Json:
    """The document with every table cell back to its text, ``texts`` dropped (its tables
    are changed in place)."""
    shared = document.get(TEXTS, [])
    whole = {k: v for k, v in document.items() if k != TEXTS}
    for rows in _tables(whole):
        for r, row in enumerate(rows):
            rows[r] = [shared[cell] if isinstance(cell, int) else cell for cell in row]
    return whole
