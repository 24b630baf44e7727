"""The dashboard's session: its token checked in constant time and never logged, and the
cookie and CSRF values derived from it (the token file itself: ``adapters.dashboard_token``).

Why it is so: docs/adr/decisions/apps-dashboard.md (session.py).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Protocol

COOKIE_PREFIX = "nodeau-dashboard-"
CSRF_HEADER = "x-nodeau-csrf"
_SESSION = b"nodeau dashboard session"
_CSRF = b"nodeau dashboard csrf"


def matches(expected: str, presented: str | None) -> bool:
    """Whether ``presented`` is ``expected``, compared in constant time (None never is)."""
    if presented is None or not expected:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def _derived(token: str, purpose: bytes) -> str:
    return hmac.new(token.encode(), purpose, hashlib.sha256).hexdigest()


def session_value(token: str) -> str:
    """What the session cookie holds for ``token``."""
    return _derived(token, _SESSION)


def csrf_value(token: str) -> str:
    """The CSRF token the page sends with the stop action and the Playground's calls."""
    return _derived(token, _CSRF)


def cookie_name(port: int) -> str:
    return f"{COOKIE_PREFIX}{port}"


class Token(Protocol):
    """The dashboard's token as its server reads it now (empty: none matches it)."""

    def current(self) -> str: ...
