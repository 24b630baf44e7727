"""Durations as people type them on a command line: ``90s``, ``3m``, ``1h30m``, ``2d``.

One parser for every flag that takes a duration (``--after``, ``--ttl``), so each
accepts the same forms and refuses junk with the same sentence. It reads back every
delay the product prints (``delay_words``), and raises ``BadDuration`` alone.
"""

from __future__ import annotations

import re
from datetime import timedelta

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
LONGEST = timedelta(days=3650)  # past this a duration is a typo, and timedelta overflows
FORMS = "whole numbers with d, h, m or s, largest first (e.g. 90s, 3m, 1h30m, 2d)"

# each unit at most once, largest first; ASCII digits only (str.isdigit takes "²"), and
# few enough of them that 3650d in seconds still matches and int() never meets a long one
_DURATION = re.compile(r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9})s)?")


class BadDuration(ValueError):
    """Text that is not a duration this parser accepts; the message says which forms are."""


def parse_duration(text: str) -> timedelta:
    """A positive duration such as ``90s``, ``3m``, ``1h30m`` or ``2d``.

    Raises ``BadDuration`` (saying which forms are accepted) for anything else: a bare
    number, a fraction, a sign, an unknown unit, units out of order, zero, or more than
    ``LONGEST``.
    """
    found = _DURATION.fullmatch(text.strip())
    if not text.strip() or found is None:
        raise BadDuration(f"{text!r} is not a duration: give {FORMS}")
    seconds = sum(
        int(amount) * size
        for amount, size in zip(found.groups(), UNITS.values(), strict=True)
        if amount is not None
    )
    if seconds <= 0:
        raise BadDuration(f"{text!r} is no time at all: give {FORMS}")
    if seconds > LONGEST.total_seconds():
        raise BadDuration(f"{text!r} is longer than {LONGEST.days}d: give a shorter duration")
    return timedelta(seconds=seconds)
