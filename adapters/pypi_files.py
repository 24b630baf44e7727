"""Fetching one file from a Python package index (httpx), pinned by its SHA-256.

Found in the index's JSON simple API (PEP 691; ``$PIP_INDEX_URL`` names a mirror), hashed
as it arrives beside its destination, and moved into place only when its SHA-256 is the
pinned one: a changed or truncated file never counts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urljoin

import httpx
from attrs import frozen

from nodeau.ports.server_install import BuildProgress, InstallError

DEFAULT_INDEX = "https://pypi.org/simple/"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
TIMEOUT = httpx.Timeout(60.0, connect=20.0)
_CHUNK = 1 << 20


@frozen(kw_only=True)
class PinnedFile:
    """One file of one project on the index, as Nodeau pinned it."""

    project: str
    filename: str
    sha256: str


def index_url(environ: Mapping[str, str]) -> str:
    """``$PIP_INDEX_URL`` when set, else PyPI's simple index."""
    url = environ.get("PIP_INDEX_URL", "").strip() or DEFAULT_INDEX
    return url if url.endswith("/") else url + "/"


def fetch_pinned(
    pinned: PinnedFile,
    dest: Path,
    *,
    environ: Mapping[str, str],
    progress: BuildProgress,
    client: httpx.Client | None = None,
) -> Path:
    """``dest``, holding the pinned file: kept when it is already there with the pinned hash,
    else fetched. InstallError when the index has no such file or sends other bytes."""
    if dest.is_file() and _sha256_of(dest) == pinned.sha256:
        return dest
    owned = client is None
    http = client or httpx.Client(timeout=TIMEOUT, follow_redirects=True)
    try:
        url = _file_url(http, index_url(environ), pinned)
        _download(http, url, pinned, dest, progress)
    except httpx.HTTPError as exc:
        where = index_url(environ)
        raise InstallError(f"fetching {pinned.filename} from {where}: {exc}") from exc
    finally:
        if owned:
            http.close()
    return dest


def _file_url(http: httpx.Client, index: str, pinned: PinnedFile) -> str:
    page = urljoin(index, f"{pinned.project}/")
    answer = http.get(page, headers={"Accept": SIMPLE_JSON})
    answer.raise_for_status()
    try:
        files = answer.json()["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise InstallError(f"{page} did not answer the JSON simple API (PEP 691)") from exc
    for entry in files:
        if isinstance(entry, dict) and entry.get("filename") == pinned.filename:
            return urljoin(page, str(entry["url"]))
    raise InstallError(f"{page} has no file {pinned.filename}")


def _download(
    http: httpx.Client, url: str, pinned: PinnedFile, dest: Path, progress: BuildProgress
) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    step = f"fetching {pinned.filename}"
    with http.stream("GET", url) as answer, part.open("wb") as out:
        answer.raise_for_status()
        expected = int(answer.headers.get("content-length", 0)) or None
        got = 0
        for chunk in answer.iter_bytes(_CHUNK):
            out.write(chunk)
            digest.update(chunk)
            got += len(chunk)
            progress(step, got, expected)
    if digest.hexdigest() != pinned.sha256:
        part.unlink(missing_ok=True)
        raise InstallError(
            f"{pinned.filename} from {url} has SHA-256 {digest.hexdigest()}, not the pinned "
            f"{pinned.sha256}: not used"
        )
    part.replace(dest)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
