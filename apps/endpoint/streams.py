"""The endpoint's sockets to its model server: httpcore's network backend over asyncio streams.

Decisions:

* httpcore speaks HTTP/1.1 on each upstream connection; what it reads and writes goes through
  a network backend, an interface httpcore lets its users supply. Its own (AnyIO) backend
  enters a cancel scope and a timer on every read and write, even without a time-out, and
  yields to the event loop once more before every write: about a quarter of the endpoint's
  CPU per request (bench/proxy.py, profiled). This backend passes reads and writes straight
  to asyncio's streams (the endpoint runs on asyncio only, uvloop's).
* A timer is set only where a wait can be long and a time-out was asked for: a connection
  (the connect time-out), a read with a read time-out (the endpoint sets none: generations
  are long), and a write only when asyncio could not send it at once (a full socket buffer).
* asyncio's errors become httpcore's, as its own backends map them: a time-out is
  ``ConnectTimeout``/``ReadTimeout``/``WriteTimeout``, any other ``OSError``
  ``ConnectError``/``ReadError``/``WriteError``. The end of the stream reads as ``b""``.
* A connection reads as "readable" when idle (httpcore then closes it rather than reuse it)
  once the server has closed it or it failed: asyncio reads the socket as data arrives, so
  the stream, not the socket, says so. Plain TCP only: no TLS (the model server is on this
  machine, spoken to in plain HTTP).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

import httpcore

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """TCP connections as asyncio streams, for httpcore's connections."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A connection to ``host:port``, within ``timeout`` seconds."""
        local = (local_address, 0) if local_address is not None else None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, local_addr=local)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"no connection within {timeout:g} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        sock: socket.socket = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        """Sleep, as httpcore's retries ask."""
        await asyncio.sleep(seconds)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection's bytes, read and written through asyncio's streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._transport = writer.transport

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Up to ``max_bytes`` bytes as they arrive; ``b""`` at the end of the stream."""
        try:
            if timeout is None:
                return await self._reader.read(max_bytes)
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(f"nothing read within {timeout} s") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send ``buffer``; wait (at most ``timeout`` seconds) only while the socket's
        buffer is full."""
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            if timeout is None or self._transport.get_write_buffer_size() == 0:
                await self._writer.drain()  # at once unless paused; raises a lost connection
                return
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(f"could not send within {timeout} s") from exc
        except (OSError, RuntimeError) as exc:  # RuntimeError: written after the close
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        """Close the connection."""
        self._writer.close()
        with suppress(OSError):  # it was broken already: closed all the same
            await self._writer.wait_closed()

    def get_extra_info(self, info: str) -> Any:
        """What httpcore asks of a stream: its socket, addresses, TLS object (none), and
        whether it reads as readable (closed or failed, for an idle connection)."""
        if info == "is_readable":
            reader = self._reader
            return reader.at_eof() or reader.exception() is not None or self._transport.is_closing()
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        return None
