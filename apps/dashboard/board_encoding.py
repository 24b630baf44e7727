"""One read of the board as the data route sends it: serialised and gzipped once per read.

Why it is so: docs/adr/decisions/apps-dashboard.md (board_encoding.py).
"""

from __future__ import annotations

import gzip
import json
import threading
from typing import Any

from attrs import frozen

from nodeau.apps.dashboard.board import Views, cli_views, page_board
from nodeau.apps.dashboard.repeated_texts import compacted

GZIP_LEVEL = 5


@frozen
class Encoded:
    """A document as bytes: as it is, and gzipped."""

    json: bytes
    gzip: bytes


def encoded(document: dict[str, Any]) -> Encoded:
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    return Encoded(json=raw, gzip=gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0))


class EncodedBoard:
    """The views of one read, the page's document encoded, the whole one when asked."""

    def __init__(self, views: Views) -> None:
        self.views = views
        self._page = compacted(page_board(views))
        self.page = encoded(self._page)
        self._whole: Encoded | None = None
        self._lock = threading.Lock()

    def whole(self) -> Encoded:
        """The page's document and ``cli``: made once, on first asking (call it on a worker
        thread: on a large fleet it takes a while)."""
        with self._lock:
            if self._whole is None:
                self._whole = encoded({**self._page, "cli": cli_views(self.views)})
            return self._whole
