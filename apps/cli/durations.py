"""Duration flags (``--after``, ``--ttl``): one parser, one sentence for junk.

Every flag that takes a duration reads it with the domain's ``parse_duration`` through
``duration_option``, which names the flag in the one-line error a person gets.
"""

from __future__ import annotations

from datetime import timedelta

from nodeau.domain.durations import BadDuration, parse_duration
from nodeau.ports.errors import SettingsError


def duration_option(flag: str, text: str) -> timedelta:
    """The duration given to ``flag``; ``SettingsError`` naming the flag and the forms."""
    try:
        return parse_duration(text)
    except BadDuration as exc:
        raise SettingsError(f"{flag} {exc}") from exc
