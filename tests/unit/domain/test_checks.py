"""The shared validators: each boundary, and the exact message a programmer reads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attrs import field, frozen

from nodeau.domain.checks import aware, not_negative, positive, positive_or_none


@frozen(kw_only=True)
class Sample:
    count: int = field(default=1, validator=positive)
    size: int = field(default=0, validator=not_negative)
    bound: int | None = field(default=None, validator=positive_or_none)
    at: datetime | None = field(default=None, validator=aware)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 0}, "count must be positive, got 0"),
        ({"count": -3}, "count must be positive, got -3"),
        ({"size": -1}, "size must not be negative, got -1"),
        ({"bound": 0}, "bound must be positive or absent, got 0"),
        (
            {"at": datetime(2026, 1, 1, 12, 0)},
            "at must be a timezone-aware moment, got 2026-01-01 12:00:00",
        ),
    ],
)
def test_impossible_values_are_named_exactly(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Sample(**kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": 1},
        {"size": 0},
        {"bound": None},
        {"bound": 1},
        {"at": None},
        {"at": datetime(2026, 1, 1, tzinfo=UTC)},
    ],
)
def test_values_on_the_boundary_are_accepted(kwargs: dict[str, object]) -> None:
    sample = Sample(**kwargs)  # type: ignore[arg-type]
    for name, value in kwargs.items():
        assert getattr(sample, name) == value
