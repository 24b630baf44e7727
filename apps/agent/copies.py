"""The agent's copies: the requests for its machine, fetched one at a time on a thread.

Why it is so: docs/adr/decisions/apps-agent.md (copies.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from functools import partial

from nodeau.apps.models.actions import pull_model
from nodeau.domain.artifacts import ArtifactFile
from nodeau.domain.catalog import Catalog, CatalogEntry
from nodeau.domain.copies import (
    CopyPhase,
    CopyProgress,
    CopyRequest,
    imported_sentence,
    next_fetch,
    resume_fetch,
    waiting_behind,
)
from nodeau.ports.models import FetchError, FetchProgress, ModelError, ModelStore, Publisher
from nodeau.ports.registry import ArtifactRegistry

UrlFor = Callable[[CatalogEntry, ArtifactFile], str]
Key = tuple[str, datetime]  # a request: its artifact and since


class Stopped(ModelError):
    """A fetch stopped on purpose: its request was taken back, or the agent is stopping."""


def _flat(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _key(request: CopyRequest) -> Key:
    return (request.artifact, request.since)


class _Attempt:
    """One try at fetching a request's files: how far it got, as progress."""

    def __init__(self, worker: CopyWorker, request: CopyRequest, entry: CatalogEntry) -> None:
        self._worker = worker
        self._request = request
        self._total = entry.entry.artifact().size_bytes
        held = [f for f in entry.entry.files if worker.store.verified_path(f.sha256)]
        self._finished = sum(f.size_bytes for f in held)  # files verified before or in this try
        self.first: int | None = None  # bytes present at the first progress of this try
        self.last = 0

    @property
    def moved(self) -> bool:
        """Whether bytes arrived during this try."""
        return self.first is not None and self.last > self.first

    def show(self, phase: CopyPhase, done: int, reason: str = "") -> None:
        self._worker.show(
            CopyProgress(
                artifact=self._request.artifact,
                since=self._request.since,
                phase=phase,
                bytes_done=done,
                bytes_total=self._total,
                reason=reason,
            )
        )

    def on_wait(self, sentence: str) -> None:
        self.show(CopyPhase.WAITING, self._finished, sentence)

    @contextmanager
    def progress_for(self, file: ArtifactFile, note: str) -> Iterator[FetchProgress]:
        def report(present: int, _expected: int) -> None:
            self._worker.check_wanted(self._request)
            done = self._finished + present
            self.first = done if self.first is None else self.first
            self.last = done
            self.show(CopyPhase.FETCHING, done, note)

        self.show(CopyPhase.FETCHING, self._finished, note)
        yield report
        self._finished += file.size_bytes  # every byte arrived: its SHA-256 decides now
        self.show(CopyPhase.VERIFYING, self._finished)


class CopyWorker:
    """Fetches the copies asked of one machine, one at a time, on a background thread."""

    def __init__(
        self,
        *,
        machine: str,
        store: ModelStore,
        registry: ArtifactRegistry,
        publisher: Publisher,
        url_for: UrlFor,
        say: Callable[[str], None],
        retry_pause_s: float = 2.0,
    ) -> None:
        self.machine = machine
        self.store = store
        self._registry = registry
        self._publisher = publisher
        self._url_for = url_for
        self._say = say
        self._retry_pause_s = retry_pause_s
        self._lock = threading.Lock()
        self._wanted: tuple[CopyRequest, ...] = ()
        self._catalog = Catalog(entries=())
        self._unknown_reason: str | None = None  # why the catalog knows none, when unread
        self._failed: dict[Key, str] = {}
        self._current: CopyProgress | None = None
        self._current_name = ""
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the agent's rounds

    def want(
        self, requests: Collection[CopyRequest], catalog: Catalog, catalog_problem: str | None
    ) -> None:
        """This round's requests (any machine's: only this one's are kept) and catalog."""
        mine = tuple(r for r in requests if r.machine == self.machine)
        live = {_key(r) for r in mine}
        with self._lock:
            self._wanted = mine
            self._catalog = catalog
            self._unknown_reason = catalog_problem
            self._failed = {k: why for k, why in self._failed.items() if k in live}
        if mine and not self._stopping.is_set() and not self.running:
            self._thread = threading.Thread(
                target=self._run, name=f"copies-{self.machine}", daemon=True
            )
            self._thread.start()
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def progress(self) -> tuple[CopyProgress, ...]:
        """Where each request stands now (the report leaves out those held verified)."""
        with self._lock:
            wanted, failed = self._wanted, dict(self._failed)
            current, behind = self._current, self._current_name
            entries = self._entries()
            unknown = self._unknown_reason
        held = self._held(wanted, entries)
        shown: list[CopyProgress] = []
        ahead = behind if current is not None else None  # what a waiting request waits for
        for request in sorted(wanted, key=lambda r: (r.since, r.artifact)):
            key = _key(request)
            if request.artifact in held:
                continue  # a ready copy: the report lists it verified
            if key in failed:
                phase, why = CopyPhase.FAILED, failed[key]
            elif current is not None and (current.artifact, current.since) == key:
                shown.append(current)
                continue
            elif request.artifact not in entries:
                phase = CopyPhase.NOT_FETCHED
                why = imported_sentence(self.machine) if unknown is None else unknown
            else:
                phase = CopyPhase.WAITING
                why = "next to fetch" if ahead is None else waiting_behind(ahead)
                ahead = ahead or request.name
            shown.append(CopyProgress(artifact=key[0], since=key[1], phase=phase, reason=why))
        return tuple(shown)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the fetch in progress (at its next piece) and wait for the thread a while."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- the thread

    def show(self, progress: CopyProgress) -> None:
        with self._lock:
            self._current = progress

    def check_wanted(self, request: CopyRequest) -> None:
        """Stopped when the agent stops or the request was taken back."""
        if self._stopping.is_set():
            raise Stopped("the agent is stopping; what arrived is kept")
        with self._lock:
            live = any(_key(r) == _key(request) for r in self._wanted)
        if not live:
            raise Stopped(f"the copy of {request.name} is no longer asked for")

    def _entries(self) -> dict[str, CatalogEntry]:
        """The catalog's entries by artifact id (called holding the lock)."""
        return {e.entry.artifact().id.hex: e for e in self._catalog.entries}

    def _held(
        self, wanted: Collection[CopyRequest], entries: Mapping[str, CatalogEntry]
    ) -> set[str]:
        """The catalog artifacts asked for whose every file is verified here now."""
        asked = {r.artifact for r in wanted} & set(entries)
        return {
            a
            for a in asked
            if all(self.store.verified_path(f.sha256) for f in entries[a].entry.files)
        }

    def _next(self) -> tuple[CopyRequest, CatalogEntry] | None:
        with self._lock:
            wanted, failed, entries = self._wanted, set(self._failed), self._entries()
        verified = self._held(wanted, entries)
        request = next_fetch(wanted, fetchable=entries, verified=verified, failed=failed)
        return None if request is None else (request, entries[request.artifact])

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            job = self._next()
            if job is None:
                self._wake.wait(timeout=5.0)
                continue
            request, entry = job
            with self._lock:
                self._current_name = request.name
            try:
                self._fetch(request, entry)
            except BaseException as exc:  # a bug: say it on the copy, keep the traceback
                self._fail(request, f"the agent's fetch broke: {_flat(exc) or type(exc).__name__}")
                raise
            finally:
                with self._lock:
                    self._current, self._current_name = None, ""

    def _fetch(self, request: CopyRequest, entry: CatalogEntry) -> None:
        self._say(f"fetching {entry.name} for the copy asked of {self.machine}")
        idle, note = 0, ""
        while True:
            attempt = _Attempt(self, request, entry)
            try:
                pull_model(
                    entry.name,
                    catalog=Catalog(entries=(entry,)),
                    store=self.store,
                    publisher=self._publisher,
                    registry=self._registry,
                    url_for=self._url_for,
                    progress_for=partial(attempt.progress_for, note=note),
                    on_wait=attempt.on_wait,
                )
            except Stopped as exc:
                self._say(f"stopped fetching {entry.name}: {exc}")
                return
            except FetchError as exc:
                idle, note = (0 if attempt.moved else idle + 1), _flat(exc)
                if not resume_fetch(idle):
                    self._fail(request, note)
                    return
                self._say(f"resuming {entry.name} after: {note}")
                if idle and self._stopping.wait(self._retry_pause_s):
                    return
                continue
            except ModelError as exc:  # wrong bytes, the reserve, the cache itself
                self._fail(request, _flat(exc))
                return
            self._say(f"{entry.name} is verified on {self.machine}: every file's SHA-256 matches")
            return

    def _fail(self, request: CopyRequest, reason: str) -> None:
        with self._lock:
            self._failed[_key(request)] = reason
        self._say(f"the copy of {request.name} failed: {reason}")
