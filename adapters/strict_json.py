"""Reading JSON documents strictly with cattrs: the hooks Nodeau's documents share.

A value must be of its exact JSON type (no ``"12"`` for 12, no ``true`` for 1) and a list
must be a list; a hook that refuses a value raises ``FieldProblem``, whose text is shown to
a person as it is, after the path of the field it was found at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import cattrs
from attrs import frozen
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import BaseValidationError, ForbiddenExtraKeysError
from cattrs.v import format_exception

_T = TypeVar("_T")


class FieldProblem(ValueError):
    """A value refused by a reading hook; its text is shown as it is."""


def json_kind(value: object) -> str:
    """What a JSON value is, in a person's words."""
    kinds = {bool: "true/false", int: "a number", float: "a number", str: "a string"}
    kinds |= {list: "a list", dict: "an object", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def exactly(kind: type[_T], wanted: str) -> Callable[[object, object], _T]:
    """A hook taking only values of exactly ``kind`` (bool is not an int here)."""

    def structure(value: object, _type: object) -> _T:
        if type(value) is not kind:
            raise FieldProblem(f"expected {wanted}, got {json_kind(value)}")
        return value

    return structure


def positive_count(value: object, _type: object) -> int:
    """A hook taking a whole number above zero."""
    number = exactly(int, "a whole number")(value, _type)
    if number <= 0:
        raise FieldProblem(f"must be above zero, got {number}")
    return number


def list_of(kind: Any, converter: cattrs.Converter) -> Callable[[object, object], tuple[Any, ...]]:
    """A hook taking a JSON list (and nothing else) into a tuple of ``kind``."""
    items = homogenous_tuple_structure_factory(kind, converter)

    def structure(value: object, type_: object) -> tuple[Any, ...]:
        if type(value) is not list:
            raise FieldProblem(f"expected a list, got {json_kind(value)}")
        return items(value, type_)  # type: ignore[no-any-return]

    return structure


def problem_text(exc: BaseException, kind: type | None) -> str:
    """A person's words for one problem cattrs found (``cattrs.transform_error``'s formatter)."""
    if isinstance(exc, FieldProblem):
        return str(exc)
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown key " + ", ".join(repr(k) for k in sorted(exc.extra_fields))
    if isinstance(exc, KeyError):
        return "missing"
    if isinstance(exc, TypeError | AttributeError):
        return "expected an object"
    return format_exception(exc, kind)


@frozen(kw_only=True)
class Problems:
    """The first problem cattrs found: where (a dotted path, "" for the document), what, and
    how many others there were."""

    where: str
    text: str
    others: int


def first_problem(exc: BaseException) -> Problems | None:
    """The first of the problems ``exc`` (cattrs' exception group) reports; None if none."""
    if not isinstance(exc, BaseValidationError):
        return None
    problems = cattrs.transform_error(exc, path="$", format_exception=problem_text)
    if not problems:
        return None
    text, _, where = problems[0].rpartition(" @ ")
    return Problems(
        where=where.removeprefix("$").removeprefix("."), text=text, others=len(problems) - 1
    )


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: an object naming one key twice is refused."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise FieldProblem(f"key {key!r} appears twice in one object")
        found[key] = value
    return found


def no_constant(name: str) -> object:
    """``json.loads``' ``parse_constant``: NaN and Infinity are not JSON numbers."""
    raise FieldProblem(f"{name} is not a JSON number")
