"""The dashboard's token: made fresh by each ``nodeau dashboard``, kept owner-only, checked
in constant time, never logged.

Why it is so: docs/adr/decisions/apps-dashboard.md (session.py).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

TOKEN_FILE = "token"
COOKIE_PREFIX = "nodeau-dashboard-"
CSRF_HEADER = "x-nodeau-csrf"
_SESSION = b"nodeau dashboard session"
_CSRF = b"nodeau dashboard csrf"


def new_token() -> str:
    return secrets.token_urlsafe(32)


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


def write_owner_only(path: Path, data: bytes) -> None:
    """Write ``path`` atomically, created with mode 0600 (in a folder of mode 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


class TokenFile:
    """The token as the server reads it: read again only when the file changed."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def current(self) -> str:
        """The token now; empty (nothing matches it) when the file cannot be read."""
        try:
            st = self._path.stat()
            seen = (st.st_ino, st.st_mtime_ns, st.st_size)
            if seen != self._seen:
                self._token = self._path.read_text().strip()
                self._seen = seen
        except OSError:
            self._seen, self._token = None, ""
        return self._token
