"""The endpoint's and the dashboard's log, bounded by rate: their services append stderr to a
file the process did not open and cannot rotate, so each minute at most ``PER_KIND`` records
of one kind, ``PER_WINDOW`` in all and ``BYTES_PER_WINDOW`` are written, each cut to
``MAX_RECORD_CHARS``, then one line counts those left out (docs/adr/0020-endpoint-limits.md).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any, TextIO

import uvicorn

WINDOW_S = 60.0
PER_KIND = 5  # records of one logger, level and message template
PER_WINDOW = 20
BYTES_PER_WINDOW = 16 * 1024
MAX_RECORD_CHARS = 2000  # a longer record (a traceback) keeps its start and its end
LOGGERS = ("uvicorn", "uvicorn.access", "nodeau", "asyncio")

_Kind = tuple[str, int, str]


class BoundedStreamHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes, per window of ``window_s`` seconds, at most ``per_kind``
    records of one kind, ``per_window`` records and ``bytes_per_window`` characters in all,
    then (at the first record after the window, or at close) one line saying how many it
    left out."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        window_s: float = WINDOW_S,
        per_kind: int = PER_KIND,
        per_window: int = PER_WINDOW,
        bytes_per_window: int = BYTES_PER_WINDOW,
        max_record_chars: int = MAX_RECORD_CHARS,
    ) -> None:
        super().__init__(stream)
        self._clock = clock
        self._window_s = window_s
        self._per_kind = per_kind
        self._per_window = per_window
        self._bytes_per_window = bytes_per_window
        self._max_record_chars = max_record_chars
        self._window_end = float("-inf")
        self._kinds: dict[_Kind, int] = {}
        self._written = 0
        self._bytes = 0
        self._left_out = 0

    def emit(self, record: logging.LogRecord) -> None:
        now = self._clock()
        if now >= self._window_end:
            self._say_left_out()
            self._window_end = now + self._window_s
            self._kinds, self._written, self._bytes = {}, 0, 0
        kind = (record.name, record.levelno, str(record.msg))
        seen = self._kinds.get(kind, 0)
        if seen >= self._per_kind or self._written >= self._per_window:
            self._left_out += 1
            return
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        if self._bytes + len(text) > self._bytes_per_window:
            self._left_out += 1
            return
        self._kinds[kind] = seen + 1
        self._written += 1
        self._bytes += len(text) + len(self.terminator)
        self._write(text)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        limit = self._max_record_chars
        if len(text) <= limit:
            return text
        head, tail = limit * 2 // 5, limit * 2 // 5
        cut = len(text) - head - tail
        return f"{text[:head]}\n[... {cut} characters left out ...]\n{text[-tail:]}"

    def say_left_out(self) -> None:
        """Write now the line counting the records left out, if any were."""
        self.acquire()
        try:
            self._say_left_out()
        finally:
            self.release()

    def close(self) -> None:
        self.say_left_out()
        super().close()

    def _say_left_out(self) -> None:
        if not self._left_out:
            return
        left_out, self._left_out = self._left_out, 0
        summary = logging.makeLogRecord(
            {
                "name": "nodeau.log",
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": f"{left_out} log records were left out: this log keeps at most "
                f"{self._per_kind} of one kind, {self._per_window} in all and "
                f"{self._bytes_per_window // 1024} KiB a minute",
            }
        )
        try:
            self._write(self.format(summary))
        except Exception:
            self.handleError(summary)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text + self.terminator)
            self.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": text}))


def say_left_out() -> None:
    """Every ``BoundedStreamHandler`` of ``LOGGERS`` counts what it left out, now (a server
    that stops by a signal re-raises it, and ends without closing its handlers)."""
    handlers = {h for name in LOGGERS for h in logging.getLogger(name).handlers}
    for handler in handlers:
        if isinstance(handler, BoundedStreamHandler):
            handler.say_left_out()


class Server(uvicorn.Server):
    """uvicorn's server, whose log counts what it left out once it has shut down."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        say_left_out()


def log_config() -> dict[str, Any]:
    """uvicorn's ``log_config``: uvicorn's own lines as it formats them, the app's and
    asyncio's too, all to stderr through one ``BoundedStreamHandler``."""
    formatter = {
        "()": "uvicorn.logging.DefaultFormatter",
        "fmt": "%(levelprefix)s %(message)s",
        "use_colors": False,
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter, "access": formatter},
        "handlers": {
            "bounded": {
                "()": f"{__name__}.BoundedStreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "default",
            }
        },
        "loggers": {
            name: {"handlers": ["bounded"], "level": "INFO", "propagate": False} for name in LOGGERS
        },
    }
