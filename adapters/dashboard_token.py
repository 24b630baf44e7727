"""The dashboard's token file: made fresh and written owner-only by each ``nodeau
dashboard``, read by the dashboard's server again only when it changed.

Why it is so: docs/adr/decisions/apps-dashboard.md (session.py and dashboard_token.py).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from nodeau.adapters.private_files import replace_whole

TOKEN_FILE = "token"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write_owner_only(path: Path, data: bytes) -> None:
    """Write ``path`` atomically, created with mode 0600 (in a folder of mode 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    replace_whole(path, data)


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
