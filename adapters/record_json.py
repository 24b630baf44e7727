"""Nodeau's JSON form of domain records (cattrs): what the state stores keep.

Why it is so: docs/adr/decisions/adapters.md (record_json.py).
"""

from __future__ import annotations

import base64
import binascii
import enum
import gzip
import json
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import cattrs

from nodeau.ports.errors import NodeauError

T = TypeVar("T")


class RecordError(NodeauError, ValueError):
    """A stored record could not be read back; one line naming what and why."""


def _structure_fraction(value: object, _type: type) -> Fraction:
    if not isinstance(value, str):
        raise ValueError(f"a fraction is stored as text n/d, got {value!r}")
    return Fraction(value)


def _structure_datetime(value: object, _type: type) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"a moment is stored as ISO 8601 text, got {value!r}")
    return datetime.fromisoformat(value)


def _structure_timedelta(value: object, _type: type) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a duration is stored as seconds, got {value!r}")
    return timedelta(seconds=value)


def _is_set(t: Any) -> bool:
    return getattr(t, "__origin__", t) in (frozenset, set)


def _sorted_list(value: Any) -> list[Any]:
    return sorted(_CONVERTER.unstructure(item) for item in value)


def _is_enum(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def converter() -> cattrs.Converter:
    """A converter with Nodeau's hooks (a new one each call; cheap, and never shared state)."""
    c = cattrs.Converter(forbid_extra_keys=True)
    c.register_unstructure_hook(datetime, lambda d: d.isoformat())
    c.register_structure_hook(datetime, _structure_datetime)
    c.register_unstructure_hook(timedelta, lambda d: d.total_seconds())
    c.register_structure_hook(timedelta, _structure_timedelta)
    c.register_unstructure_hook(Fraction, lambda f: f"{f.numerator}/{f.denominator}")
    c.register_structure_hook(Fraction, _structure_fraction)
    c.register_unstructure_hook(Path, str)
    c.register_structure_hook(Path, lambda v, _t: Path(v))
    c.register_unstructure_hook_func(_is_enum, lambda e: e.value)
    c.register_structure_hook_func(_is_enum, lambda v, t: t(v))
    c.register_unstructure_hook_func(_is_set, _sorted_list)  # JSON has no sets: sorted lists
    return c


_CONVERTER = converter()


def to_plain(value: object, type_: Any) -> Any:
    """The JSON-ready (dicts, lists, strings, numbers) form of a domain value."""
    return _CONVERTER.unstructure(value, type_)


def from_plain(raw: object, type_: type[T], what: str) -> T:
    """A domain value back from its plain form; RecordError naming ``what`` if it is not one."""
    try:
        return _CONVERTER.structure(raw, type_)
    except Exception as exc:  # cattrs raises exception groups for every problem it finds
        raise RecordError(f"{what} is not a readable record: {_first_problem(exc)}") from exc


def dumps(value: object, type_: Any) -> str:
    """The JSON text of a domain value."""
    return json.dumps(to_plain(value, type_))


def loads(text: str, type_: type[T], what: str) -> T:
    """A domain value from JSON text; RecordError naming ``what`` if it is not one."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{what} is not JSON: {exc.msg} at character {exc.pos}") from exc
    return from_plain(raw, type_, what)


def pack(value: object, type_: Any) -> str:
    """A domain value as gzip-compressed JSON in base64 text: for large records kept in
    places every reader pays for (an admission weighs every card it assessed)."""
    raw = json.dumps(to_plain(value, type_), separators=(",", ":")).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpack(text: str, type_: type[T], what: str) -> T:
    """A domain value back from ``pack``'s text; RecordError naming ``what`` if it is not one."""
    try:
        raw = gzip.decompress(base64.b64decode(text, validate=True))
    except (binascii.Error, OSError, EOFError, ValueError) as exc:
        raise RecordError(f"{what} is not packed JSON: {exc}") from exc
    return loads(raw.decode("utf-8", errors="replace"), type_, what)


def _first_problem(exc: BaseException) -> str:
    problems = cattrs.transform_error(exc) if isinstance(exc, cattrs.BaseValidationError) else []
    return problems[0] if problems else str(exc) or type(exc).__name__
