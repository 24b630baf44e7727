"""Leader election's rules: exact cases, and a property over interleaved candidates.

Candidates run read, decide, conditional write and answer as separate steps on one simulated
Lease, in any interleaving, delays and clock offsets: never two believe they lead.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from attrs import define
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeau.domain.leadership import (
    LeaseRecord,
    LeaseTerms,
    Observation,
    TermsError,
    expires_at,
    lead_left,
    leads,
    may_take,
    observe,
    released,
    taken,
)

# kube-controller-manager's terms: the exact cases below are worked out on them
TERMS = LeaseTerms(duration_s=15, renew_deadline_s=10, retry_period_s=2)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def held(holder: str | None, duration: int | None = 15) -> LeaseRecord:
    return LeaseRecord(holder=holder, duration_s=duration, acquired_at=EPOCH, renewed_at=EPOCH)


def seen(holder: str | None, since: float, duration: int | None = 15) -> Observation:
    return Observation(record=held(holder, duration), version="7", since=since)


def test_the_defaults_keep_kube_controller_managers_margin_with_a_shorter_lease() -> None:
    terms = LeaseTerms()
    assert (terms.duration_s, terms.renew_deadline_s, terms.retry_period_s) == (12, 7, 2)
    assert terms.duration_s - terms.renew_deadline_s == 15 - 10  # kube-controller-manager's
    # a standby sees the last renewal at most a retry period late, then waits the lease out
    assert terms.duration_s + terms.retry_period_s < 15
    assert terms.stated_duration_s == 12
    assert TERMS.stated_duration_s == 15
    assert LeaseTerms(duration_s=12.5, renew_deadline_s=10).stated_duration_s == 13


def test_a_retry_period_of_one_second_or_less_is_allowed() -> None:
    assert LeaseTerms(duration_s=3, renew_deadline_s=2, retry_period_s=1).retry_period_s == 1
    assert LeaseTerms(duration_s=2, renew_deadline_s=1, retry_period_s=0.5).retry_period_s == 0.5


@pytest.mark.parametrize(
    ("duration", "deadline", "retry", "says"),
    [
        (10, 10, 2, "the lease duration (10 s) must be more than the renew deadline (10 s)"),
        (15, 2.4, 2, "the renew deadline (2.4 s) must be more than 1.2 x the retry period (2 s)"),
        (15, 10, 0, "the retry period must be positive, got 0 s"),
        (15, 10, -1, "the retry period must be positive, got -1 s"),
    ],
)
def test_terms_that_cannot_elect_safely_are_refused(
    duration: float, deadline: float, retry: float, says: str
) -> None:
    with pytest.raises(TermsError) as refused:
        LeaseTerms(duration_s=duration, renew_deadline_s=deadline, retry_period_s=retry)
    assert str(refused.value) == says


@pytest.mark.parametrize(
    ("observation", "now", "allowed"),
    [
        (None, 0.0, True),  # no Lease yet
        (seen(None, 100.0), 100.0, True),  # released: at once
        (seen("me", 100.0), 100.0, True),  # a renewal
        (seen("other", 100.0), 114.99, False),
        (seen("other", 100.0), 115.0, True),  # exactly at expiry
        (seen("other", 100.0, duration=30), 115.0, False),  # the holder's stated duration
        (seen("other", 100.0, duration=30), 130.0, True),
        (seen("other", 100.0, duration=None), 115.0, True),  # none stated: our own
        (seen("other", 100.0, duration=0), 114.0, False),
    ],
)
def test_who_may_take_the_lease(observation: Observation | None, now: float, allowed: bool) -> None:
    assert may_take(observation, "me", now, TERMS) is allowed


def test_an_unchanged_version_keeps_the_moment_it_was_first_seen() -> None:
    first = observe(None, held("other"), "7", 100.0)
    again = observe(first, held("other"), "7", 110.0)
    changed = observe(again, held("other"), "8", 112.0)
    assert (first.since, again.since, changed.since) == (100.0, 100.0, 112.0)
    assert expires_at(again, TERMS) == 115.0
    assert expires_at(changed, TERMS) == 127.0


def test_taking_counts_a_transition_and_renewing_keeps_it() -> None:
    later = EPOCH + timedelta(seconds=5)
    first = taken(None, "me", EPOCH, TERMS)
    assert first == LeaseRecord(
        holder="me", duration_s=15, acquired_at=EPOCH, renewed_at=EPOCH, transitions=0
    )
    renewed = taken(first, "me", later, TERMS)
    assert (renewed.acquired_at, renewed.renewed_at, renewed.transitions) == (EPOCH, later, 0)
    stolen = taken(renewed, "you", later, TERMS)
    assert (stolen.holder, stolen.acquired_at, stolen.transitions) == ("you", later, 1)
    let_go = released(stolen, later)
    assert (let_go.holder, let_go.duration_s, let_go.transitions) == (None, 1, 1)
    assert taken(let_go, "me", later, TERMS).transitions == 2


@pytest.mark.parametrize(
    ("renewed_at", "now", "leading", "left"),
    [
        (None, 5.0, False, 0.0),
        (100.0, 100.0, True, 10.0),
        (100.0, 109.5, True, 0.5),
        (100.0, 110.0, False, 0.0),  # the renew deadline itself: no longer
        (100.0, 99.0, False, 0.0),  # a clock before the renewal is not trusted
    ],
)
def test_a_holder_leads_until_its_renew_deadline(
    renewed_at: float | None, now: float, leading: bool, left: float
) -> None:
    assert leads(renewed_at, now, TERMS) is leading
    assert lead_left(renewed_at, now, TERMS) == pytest.approx(left)


# -- the property: never two leaders at one moment -----------------------------------------------


@define
class Server:
    """The API server's one Lease: its record and resourceVersion (0: none)."""

    record: LeaseRecord | None = None
    version: int = 0


@define
class Candidate:
    """One controller's state, and its attempt in flight (a phase of the controller's own)."""

    name: str
    offset: float  # its monotonic clock reads real time + offset
    observed: Observation | None = None
    renewed_at: float | None = None
    phase: str = "idle"  # idle, read, write, answer
    started: float = 0.0
    read_version: int = 0
    writing: LeaseRecord | None = None
    won: bool = False

    def local(self, real: float) -> float:
        return real + self.offset


def step(server: Server, c: Candidate, real: float, terms: LeaseTerms = TERMS) -> None:
    """The next phase of ``c``'s attempt, as the controller runs it (``Leadership.attempt``):
    begin, read and decide, the conditional write landing, the answer arriving."""
    now = c.local(real)
    if c.phase == "idle":
        c.phase, c.started = "read", now
    elif c.phase == "read":
        c.read_version = server.version
        if server.record is not None:
            c.observed = observe(c.observed, server.record, str(server.version), now)
        if not may_take(c.observed if server.record else None, c.name, now, terms):
            c.phase = "idle"
            return
        at = EPOCH + timedelta(seconds=real)
        c.writing, c.phase = taken(server.record, c.name, at, terms), "write"
    elif c.phase == "write":
        c.won = server.version == c.read_version  # conditional on the version read
        if c.won:
            server.record, server.version = c.writing, server.version + 1
        c.phase = "answer"
    else:
        if c.won:
            c.renewed_at = c.started
        c.phase = "idle"


def release(server: Server, c: Candidate, real: float) -> None:
    """``Leadership.release``: step down first, then let the Lease go if it names ``c``."""
    c.renewed_at = None
    if server.record is not None and server.record.holder == c.name:
        server.record = released(server.record, EPOCH + timedelta(seconds=real))
        server.version += 1


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["attempt", "attempt", "phase", "phase", "wait", "wait", "release"]),
        st.integers(min_value=0, max_value=1),
        # the moments that matter (around the renew deadline and the lease duration), or any
        # (both kube-controller-manager's terms and the defaults)
        st.sampled_from([0.0, 0.5, 1.0, 2.0, 4.9, 5.0, 6.9, 7.0, 9.9, 10.0, 11.9, 12.0, 14.9, 15.0])
        | st.floats(min_value=0, max_value=20, allow_nan=False),
    ),
    max_size=40,
)


def leaders(candidates: list[Candidate], real: float, terms: LeaseTerms = TERMS) -> list[str]:
    return [c.name for c in candidates if leads(c.renewed_at, c.local(real), terms)]


@pytest.mark.parametrize("terms", [TERMS, LeaseTerms()], ids=["15-10-2", "defaults"])
@settings(max_examples=1000, deadline=None)
@given(
    steps=STEPS,
    offsets=st.lists(st.floats(min_value=-1e4, max_value=1e4), min_size=2, max_size=2),
)
def test_never_two_candidates_believe_they_lead_at_one_moment(
    terms: LeaseTerms, steps: list[tuple[str, int, float]], offsets: list[float]
) -> None:
    server = Server()
    candidates = [Candidate(name=f"c{i}", offset=o) for i, o in enumerate(offsets)]
    real = 0.0
    for kind, who, dt in steps:
        if kind == "wait":
            # time passes; check at many moments within the wait, not only at its end
            for k in range(1, 5):
                assert len(leaders(candidates, real + dt * k / 4, terms)) <= 1
            real += dt
        elif kind == "release":
            if candidates[who].phase == "idle":
                release(server, candidates[who], real)
        elif kind == "phase":  # one phase: other steps may come between its phases
            step(server, candidates[who], real, terms)
        else:  # the rest of its attempt at once
            step(server, candidates[who], real, terms)
            while candidates[who].phase != "idle":
                step(server, candidates[who], real, terms)
        assert len(leaders(candidates, real, terms)) <= 1


def test_a_standby_takes_over_once_the_leader_stops_renewing() -> None:
    server = Server()
    leader, standby = Candidate(name="a", offset=0.0), Candidate(name="b", offset=500.0)

    def attempt(c: Candidate, real: float) -> None:
        for _phase in range(4):
            step(server, c, real)

    attempt(leader, 0.0)
    attempt(standby, 1.0)  # sees a's Lease from 1.0 on its clock
    assert leaders([leader, standby], 1.0) == ["a"]
    attempt(standby, 15.9)  # unchanged since 1.0: not yet
    assert server.record is not None and server.record.holder == "a"
    assert leaders([leader, standby], 10.0) == []  # a's renew deadline passed
    attempt(standby, 16.0)
    assert server.record.holder == "b" and server.record.transitions == 1
    assert leaders([leader, standby], 16.0) == ["b"]
    attempt(leader, 17.0)  # a comes back: b holds it, renewed just now
    assert leaders([leader, standby], 17.0) == ["b"]


def test_a_holder_that_stated_one_second_is_gone_one_second_after_it_was_seen() -> None:
    seen = Observation(record=held("a", duration=1), version="7", since=100.0)
    assert expires_at(seen, TERMS) == 101.0


def test_a_renewal_states_the_duration_the_holder_has_now() -> None:
    before = held("a", duration=7)
    at = EPOCH + timedelta(seconds=30)
    after = taken(before, "a", at, LeaseTerms(duration_s=20, renew_deadline_s=10))
    assert (after.holder, after.duration_s, after.renewed_at) == ("a", 20, at)


def test_a_release_names_no_holder_one_second_and_when_it_let_go() -> None:
    at = EPOCH + timedelta(seconds=45)
    before = LeaseRecord(
        holder="a", duration_s=15, acquired_at=EPOCH, renewed_at=EPOCH, transitions=3
    )
    assert released(before, at) == LeaseRecord(
        holder=None, duration_s=1, acquired_at=at, renewed_at=at, transitions=3
    )


def test_a_version_seen_again_keeps_its_moment_and_takes_the_record_read() -> None:
    first = observe(None, held("a"), "7", now=10.0)
    again = observe(first, held("b"), "7", now=20.0)
    assert (again.record, again.since) == (held("b"), 10.0)


def test_a_negative_count_of_transitions_is_refused_in_these_words() -> None:
    with pytest.raises(ValueError, match=r"^a lease's transitions cannot be negative, got -1$"):
        LeaseRecord(holder=None, duration_s=None, transitions=-1)
