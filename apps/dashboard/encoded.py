"""One read of the board as the data route sends it: serialised and gzipped once per read.

Decisions (bench/dashboard.py measured why):

* The page's document (``board.page_board``, its repeated long texts sent once:
  ``texts``) is serialised and gzipped when it is read, on the worker thread that read it,
  so a poll only sends bytes that are ready. On a fleet of 100 machines and 500 workloads
  it is about 0.2 MB of JSON, 20 kB gzipped (it was 4.75 MB with the CLI's JSON and every
  text repeated).
* The whole document (``?with=cli``: the page's sections and the CLI's JSON of every view,
  ``board.cli_views``) is made from the same views only when first asked for: converting
  every view with the CLI's converter costs more than the rest of the document, and the
  page never asks for it. Programs and tests that compare the page with the CLI do; they
  get the same read the page got.
* Python's ``json`` with compact separators, not a faster third-party encoder: at this size
  encoding takes a few milliseconds once per read, off the event loop.
"""

from __future__ import annotations

import gzip
import json
import threading
from typing import Any

from attrs import frozen

from nodeau.apps.dashboard.board import Views, cli_views, page_board
from nodeau.apps.dashboard.texts import compacted

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
