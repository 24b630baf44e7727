"""Fetching curated files from their publisher over HTTP (httpx), resumable, hashed on arrival.

Why it is so: docs/adr/decisions/adapters.md (http_publisher.py).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
from attrs import define, field

from nodeau.adapters.hashing import HashingThread, feed_file
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.ports.models import (
    DiskReserveError,
    FetchError,
    FetchProgress,
    ModelError,
    PartialFile,
)

if TYPE_CHECKING:
    from hashlib import _Hash

HUGGING_FACE = "https://huggingface.co"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_IOV_MAX = 1024  # buffers per writev call: IOV_MAX on Linux and macOS


def fetch_url(entry: CuratedEntry, file: ArtifactFile, *, base_url: str = HUGGING_FACE) -> str:
    """The URL of ``file`` at the entry's pinned revision (the Hugging Face layout).

    ``{base_url}/{repo}/resolve/{revision}/{path}``: the revision is a commit id,
    so the bytes behind the URL cannot change.
    """
    if file not in entry.files:
        raise ValueError(f"{file.path} is not a file of catalog entry {entry.name}")
    repo = quote(entry.repo, safe="/")
    path = quote(file.path, safe="/")
    return f"{base_url.rstrip('/')}/{repo}/resolve/{entry.revision}/{path}"


class _PartialWriter:
    """The partial file, open for appending; its OSErrors become the port's errors.

    Pieces are written a batch at a time with one ``writev``: no copy into a
    user-space buffer, and about one system call per chunk.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file = path.open("ab", buffering=0)
        except OSError as exc:
            raise FetchError(f"{path}: cannot open for writing ({exc.strerror})") from exc

    def __enter__(self) -> _PartialWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._file.close()

    def size(self) -> int:
        return self._file.seek(0, os.SEEK_END)

    def write(self, pieces: list[bytes]) -> None:
        """Append every piece, in order."""
        try:
            for start in range(0, len(pieces), _IOV_MAX):
                group = pieces[start : start + _IOV_MAX]
                written = os.writev(self._file.fileno(), group)
                if written < sum(len(p) for p in group):  # short write: finish it plainly
                    self._write_all(memoryview(b"".join(group))[written:])
        except OSError as error:
            raise self._failed(error) from error

    def _write_all(self, rest: memoryview) -> None:
        while rest:
            count = self._file.write(rest)
            if not count:
                raise OSError(errno.EIO, "the file accepted no more bytes")
            rest = rest[count:]

    def empty(self) -> None:
        try:
            self._file.truncate(0)
        except OSError as error:
            raise self._failed(error) from error

    def _failed(self, error: OSError) -> ModelError:
        if error.errno == errno.ENOSPC:
            return DiskReserveError(f"{self.path}: the disk is full")
        return FetchError(f"{self.path}: cannot write ({error.strerror})")


@define
class _Transfer:
    """Where one fetch stands: bytes in the partial file and their running hash."""

    url: str
    size: int
    out: _PartialWriter
    present: int = 0
    hasher: _Hash = field(factory=hashlib.sha256)

    def append(self, pieces: list[bytes], hashing: HashingThread) -> None:
        """Write ``pieces`` to the partial file, then hand them to the hashing thread."""
        self.out.write(pieces)
        hashing.feed(pieces)
        self.present += sum(len(p) for p in pieces)

    def restart(self) -> None:
        """Empty the partial file and the hash: the next byte written is byte zero."""
        self.out.empty()
        self.present = 0
        self.hasher = hashlib.sha256()

    def lost(self, problem: str) -> FetchError:
        """The error for a fetch that stopped here, saying what was kept."""
        kept = f"; kept {self.present} of {self.size} bytes to resume" if self.present else ""
        return FetchError(f"{self.url}: {' '.join(problem.split())}{kept}")


class HttpPublisher:
    """A :class:`~nodeau.ports.models.Publisher` over an httpx client."""

    def __init__(
        self,
        client: httpx.Client,
        *,
        chunk_bytes: int = 1024 * 1024,
        stall_timeout_s: float = 30.0,
    ) -> None:
        if chunk_bytes <= 0 or stall_timeout_s <= 0:
            raise ValueError("chunk_bytes and stall_timeout_s must be positive")
        self._client = client
        self._chunk_bytes = chunk_bytes
        self._stall_timeout_s = stall_timeout_s

    @classmethod
    def over_the_internet(cls) -> HttpPublisher:
        """Following redirects (a catalog's URL may move), 30 s for a read, 10 s to connect."""
        timeout = httpx.Timeout(30.0, connect=10.0)
        return cls(httpx.Client(follow_redirects=True, timeout=timeout))

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()

    def fetch_into(
        self, url: str, partial: PartialFile, expected: ArtifactFile, progress: FetchProgress
    ) -> Sha256:
        """Append the missing bytes to ``partial.path``; the SHA-256 of the whole file.

        The file's size on disk is what counts as present (``bytes_present`` may
        be stale). A prefix longer than the expected size cannot be the file's
        and is discarded.
        """
        with _PartialWriter(partial.path) as out:
            transfer = _Transfer(url=url, size=expected.size_bytes, out=out, present=out.size())
            if transfer.present > transfer.size:
                transfer.restart()
            elif transfer.present:
                _hash_prefix(transfer, partial.path)
            progress(transfer.present, transfer.size)
            if transfer.present < transfer.size:
                self._download(transfer, progress)
        return Sha256(hex=transfer.hasher.hexdigest())

    def _download(self, transfer: _Transfer, progress: FetchProgress) -> None:
        headers = {"Accept-Encoding": "identity"}
        if transfer.present:
            headers["Range"] = f"bytes={transfer.present}-"
        timeout = httpx.Timeout(self._stall_timeout_s)
        try:
            with self._client.stream("GET", transfer.url, headers=headers, timeout=timeout) as rsp:
                if _starts_at(rsp, transfer) == 0 and transfer.present:
                    transfer.restart()
                self._receive(rsp, transfer, progress)
        except httpx.TimeoutException as exc:
            raise transfer.lost(f"no byte arrived for {self._stall_timeout_s:g} s") from exc
        except httpx.ConnectError as exc:
            raise transfer.lost(f"cannot reach the publisher ({exc})") from exc
        except httpx.HTTPError as exc:
            raise transfer.lost(f"the transfer broke ({exc})") from exc

    def _receive(self, rsp: httpx.Response, transfer: _Transfer, progress: FetchProgress) -> None:
        pending: list[bytes] = []  # received, not yet written
        pending_bytes = 0
        with HashingThread(transfer.hasher) as hashing:
            try:
                for piece in rsp.iter_raw():
                    room = transfer.size - transfer.present - pending_bytes
                    too_many = len(piece) > room
                    pending.append(piece[:room] if too_many else piece)
                    pending_bytes += min(len(piece), room)
                    if too_many or pending_bytes >= self._chunk_bytes:
                        batch, pending, pending_bytes = pending, [], 0
                        transfer.append(batch, hashing)
                        if too_many:
                            raise transfer.lost(
                                "the publisher sent more bytes than the catalog lists"
                            )
                        progress(transfer.present, transfer.size)
            finally:
                if pending:  # what arrived before a failure is kept for the resume
                    transfer.append(pending, hashing)
        if transfer.present < transfer.size:
            raise transfer.lost("the publisher ended the file early")
        progress(transfer.present, transfer.size)


def _hash_prefix(transfer: _Transfer, path: Path) -> None:
    """Hash the bytes kept from an earlier attempt, once, before asking for the rest."""
    try:
        hashed = feed_file(transfer.hasher, path, limit=transfer.present)
    except OSError as exc:
        raise FetchError(f"{path}: cannot read the bytes kept ({exc.strerror})") from exc
    if hashed != transfer.present:
        raise FetchError(f"{path}: shrank while its kept bytes were read")


def _starts_at(rsp: httpx.Response, transfer: _Transfer) -> int:
    """The offset the response body starts at; FetchError for any answer that cannot be used."""
    status = rsp.status_code
    if status == 416:
        raise transfer.lost("the publisher has no bytes past those already here (HTTP 416)")
    if status not in (200, 206):
        raise transfer.lost(f"the publisher answered HTTP {status} {rsp.reason_phrase}")
    encoding = rsp.headers.get("Content-Encoding", "identity").lower()
    if encoding != "identity":
        raise transfer.lost(f"the publisher sent the file {encoding}-encoded")
    start = 0
    if status == 206:
        match = _CONTENT_RANGE.fullmatch(rsp.headers.get("Content-Range", "").strip())
        if match is None or int(match.group(1)) != transfer.present:
            got = rsp.headers.get("Content-Range", "none")
            raise transfer.lost(f"asked for bytes from {transfer.present}, got range {got}")
        total = match.group(3)
        if total != "*" and int(total) != transfer.size:
            raise transfer.lost(
                f"the publisher's file has {total} bytes, the catalog lists {transfer.size}"
            )
        start = transfer.present
    length = rsp.headers.get("Content-Length")
    if length is not None and length.isdigit() and start + int(length) != transfer.size:
        raise transfer.lost(
            f"the publisher offers {start + int(length)} bytes, the catalog lists {transfer.size}"
        )
    return start
