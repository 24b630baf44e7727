"""One controller's part in the election: campaign for the Lease, renew it, lead only while held.

Why it is so: docs/adr/decisions/apps-controller.md (leadership.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from nodeau.apps.controller.loop import Controller
from nodeau.domain.leadership import (
    LeaseTerms,
    Observation,
    expires_at,
    lead_left,
    leads,
    may_take,
    observe,
    released,
    taken,
)
from nodeau.ports.errors import NodeauError
from nodeau.ports.leader_lease import LeaderLease, NotLeading

TERM_CHECK_S = 0.5  # how often a term looks whether the process was asked to stop


class Leadership:
    """One candidate for the leader Lease, and whether it leads now."""

    def __init__(
        self,
        lease: LeaderLease,
        *,
        identity: str,
        terms: LeaseTerms,
        clock: Callable[[], datetime],
        log: Callable[[str], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = lease
        self.identity = identity
        self.terms = terms
        self._clock = clock
        self._log = log
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._observed: Observation | None = None
        self._renewed_at: float | None = None  # start of the last successful take or renewal
        self._said = ""  # the last thing logged about who leads
        self.changed = threading.Event()  # set whenever it starts leading

    def leads(self) -> bool:
        """Whether this controller leads at this moment."""
        with self._lock:
            return leads(self._renewed_at, self._monotonic(), self.terms)

    def lead_left(self) -> float:
        """Seconds of leadership left now, if no renewal succeeds meanwhile."""
        with self._lock:
            return lead_left(self._renewed_at, self._monotonic(), self.terms)

    def fence(self) -> float:
        """Seconds of leadership left when this controller leads; NotLeading otherwise (the
        write is not sent)."""
        left = self.lead_left()
        if left <= 0:
            raise NotLeading(f"controller {self.identity} does not lead: it writes nothing")
        return left

    def holder(self) -> str | None:
        """Who the Lease named when this controller last read it."""
        with self._lock:
            return None if self._observed is None else self._observed.record.holder

    def attempt(self) -> bool:
        """One try to take or renew the Lease; whether this controller leads after it."""
        started = self._monotonic()
        read = self._lease.read()
        with self._lock:
            now = self._monotonic()
            if read is not None:
                self._observed = observe(self._observed, read.record, read.version, now)
            allowed = may_take(self._observed if read else None, self.identity, now, self.terms)
        if not allowed:
            return self.leads()
        record = taken(read.record if read else None, self.identity, self._clock(), self.terms)
        made = (
            self._lease.create(record)
            if read is None
            else self._lease.replace(record, read.version)
        )
        if made is None:  # someone else wrote first: read again next time
            return self.leads()
        with self._lock:
            self._observed = observe(self._observed, made.record, made.version, self._monotonic())
            gained = not leads(self._renewed_at, self._monotonic(), self.terms)
            self._renewed_at = started
        if gained:
            self.changed.set()
        return True

    def campaign(self, stop: threading.Event) -> None:
        """Take or renew the Lease every retry period until ``stop`` is set; log who leads."""
        while not stop.is_set():
            try:
                self.attempt()
                self._say(self._who_leads())
            except NodeauError as exc:
                self._say(f"leader Lease not read or renewed this time: {exc.one_line()}")
            stop.wait(self._next_try())

    def _next_try(self) -> float:
        """Seconds to the next try: the retry period, or less when the Lease expires sooner."""
        wait = self.terms.retry_period_s
        with self._lock:
            seen, now = self._observed, self._monotonic()
            if seen is not None and not leads(self._renewed_at, now, self.terms):
                wait = min(wait, max(0.0, expires_at(seen, self.terms) - now) + 0.01)
        return wait

    def _who_leads(self) -> str:
        if self.leads():
            return f"controller {self.identity} leads"
        return f"controller {self.identity} stands by ({self.holder() or 'no one'} leads)"

    def _say(self, line: str) -> None:
        if line != self._said:
            self._said = line
            self._log(line)

    def release(self) -> None:
        """Stop leading now and, if the Lease still names this controller, let it go."""
        with self._lock:
            self._renewed_at = None
        try:
            read = self._lease.read()
            if read is not None and read.record.holder == self.identity:
                self._lease.replace(released(read.record, self._clock()), read.version)
        except NodeauError as exc:
            self._log(f"leader Lease not released: {exc.one_line()}")


def serve(
    leadership: Leadership,
    controller: Callable[[], Controller],
    resync_s: float,
    stop: threading.Event,
    log: Callable[[str], None],
) -> None:
    """Campaign, and run a ``controller()`` for each term of leadership, until ``stop``."""
    campaign = threading.Thread(target=leadership.campaign, args=(stop,), name="leader-lease")
    campaign.start()
    try:
        while not stop.is_set():
            if not leadership.leads():
                leadership.changed.wait(TERM_CHECK_S)
                leadership.changed.clear()
                continue
            term = threading.Event()
            ender = threading.Thread(target=end_term, args=(leadership, stop, term), daemon=True)
            ender.start()
            try:
                controller().run(resync_s, term)
            except NotLeading:
                pass
            finally:
                term.set()
                ender.join()
            if not stop.is_set():
                log(f"controller {leadership.identity} no longer leads: standing by")
    finally:
        stop.set()
        campaign.join()
        leadership.release()


def end_term(leadership: Leadership, stop: threading.Event, term: threading.Event) -> None:
    """Set ``term`` the moment leadership ends or ``stop`` is set (whichever comes first)."""
    while not term.is_set():
        left = leadership.lead_left()
        if left <= 0 or stop.is_set():
            term.set()
            return
        stop.wait(min(left, TERM_CHECK_S))
