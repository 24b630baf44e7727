"""Checks on values: attrs validators shared by every domain value.

Why it is so: docs/adr/decisions/domain.md (checks.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from attrs import Attribute


def positive(_instance: object, attribute: Attribute[Any], value: int) -> None:
    """The field must be greater than zero."""
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive, got {value}")


def not_negative(_instance: object, attribute: Attribute[Any], value: int) -> None:
    """The field must be zero or more."""
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


def positive_or_none(_instance: object, attribute: Attribute[Any], value: int | None) -> None:
    """The field is a bound: absent (no bound), or greater than zero."""
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be positive or absent, got {value}")


def aware(_instance: object, attribute: Attribute[Any], value: datetime | None) -> None:
    """A moment must carry its time zone: a naive one would need the local zone to print."""
    if value is not None and value.utcoffset() is None:
        raise ValueError(f"{attribute.name} must be a timezone-aware moment, got {value}")
