"""Copies: who holds a request, what taking one back does, the state each copy is shown in,
and which request an agent fetches next.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.copies import (
    PERSON,
    TRIES_WITHOUT_PROGRESS,
    Ask,
    CopyPhase,
    CopyProgress,
    CopyRequest,
    CopyState,
    MachineCopies,
    asked_sentence,
    asker_problem,
    copy_status,
    copy_statuses,
    find_request,
    imported_sentence,
    next_fetch,
    recovery_asker,
    resume_fetch,
    with_ask,
    withdrawal,
    without_ask,
)
from nodeau.domain.recovery import copy_asks
from tests.support.builders.recovery_inputs import ART, need
from tests.support.builders.recovery_inputs import asked as asked_at

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
QWEN, LLAMA, OWN = "a" * 64, "b" * 64, "c" * 64
CHAT = recovery_asker("chat")


def asked(*askers: str, machine: str = "garage", artifact: str = QWEN) -> CopyRequest:
    made: tuple[CopyRequest, ...] = ()
    for i, asker in enumerate(askers):
        made = with_ask(
            made, machine=machine, artifact=artifact, name="qwen", asker=asker,
            at=T0 + timedelta(minutes=i),
        )  # fmt: skip
    found = find_request(made, machine, artifact)
    assert found is not None
    return found


def report(
    *progress: CopyProgress, verified: dict[str, tuple[str, ...]] | None = None
) -> MachineCopies:
    return MachineCopies(
        machine="garage", at=T0 + timedelta(hours=1), verified=verified or {}, progress=progress
    )


def progress(phase: CopyPhase, **fields: object) -> CopyProgress:
    return CopyProgress(artifact=QWEN, since=T0, phase=phase, **fields)  # type: ignore[arg-type]


# -- askers and requests


@pytest.mark.parametrize("asker", [PERSON, "recovery:chat", recovery_asker("svc-1")])
def test_askers_are_a_person_or_a_workloads_recovery(asker: str) -> None:
    assert asker_problem(asker) is None


@pytest.mark.parametrize("asker", ["", "me", "recovery:", "recovery: chat", "Person"])
def test_anything_else_is_not_an_asker(asker: str) -> None:
    assert asker_problem(asker) is not None
    with pytest.raises(ValueError, match="an asker is 'person' or 'recovery:<workload>'"):
        Ask(asker=asker, at=T0)


def test_a_request_is_made_once_and_joined_by_other_askers() -> None:
    first = asked(PERSON)
    assert (first.since, first.name, first.askers) == (T0, "qwen", (Ask(asker=PERSON, at=T0),))
    both = asked(PERSON, CHAT)
    assert both.since == T0  # joining keeps the request's moment
    assert [a.asker for a in both.askers] == [PERSON, CHAT]
    assert both.recoveries == ("chat",)
    again = with_ask((both,), machine="garage", artifact=QWEN, name="other", asker=PERSON, at=T0)
    assert again == (both,)  # asking again changes nothing


def test_requests_are_kept_by_machine_then_artifact() -> None:
    made: tuple[CopyRequest, ...] = ()
    for machine, artifact in (("garage", LLAMA), ("attic", QWEN), ("garage", QWEN)):
        made = with_ask(made, machine=machine, artifact=artifact, name="m", asker=PERSON, at=T0)
    assert [r.key for r in made] == [("attic", QWEN), ("garage", QWEN), ("garage", LLAMA)]


def test_a_request_stays_while_anyone_holds_it() -> None:
    both = asked(PERSON, CHAT)
    left = without_ask((both,), machine="garage", artifact=QWEN, asker=PERSON)
    assert [a.asker for r in left for a in r.askers] == [CHAT]
    assert without_ask(left, machine="garage", artifact=QWEN, asker=CHAT) == ()
    assert without_ask(left, machine="attic", artifact=QWEN, asker=CHAT) == left


def test_a_request_has_an_asker_listed_once() -> None:
    with pytest.raises(ValueError, match="at least one asker"):
        CopyRequest(machine="garage", artifact=QWEN, name="qwen", since=T0, askers=())
    twice = (Ask(asker=PERSON, at=T0), Ask(asker=PERSON, at=T0))
    with pytest.raises(ValueError, match="listed once each"):
        CopyRequest(machine="garage", artifact=QWEN, name="qwen", since=T0, askers=twice)


# -- taking an ask back


def test_taking_back_the_last_ask_ends_the_request_and_deletes_no_file() -> None:
    done = withdrawal(asked(PERSON), asker=PERSON, machine="garage", name="qwen")
    assert done.after is None and done.changed
    assert done.sentence == (
        "the copy of qwen on garage is no longer asked for: its agent stops fetching it if it "
        "was, and no file is deleted (what garage verified stays there)"
    )


def test_a_copy_a_recovery_relies_on_stays() -> None:
    done = withdrawal(asked(PERSON, CHAT), asker=PERSON, machine="garage", name="qwen")
    assert done.after is not None and done.after.recoveries == ("chat",)
    assert done.sentence == (
        "your ask for a copy of qwen on garage is taken back, but the copy stays: the recovery "
        "of chat relies on it; no file is deleted"
    )


def test_taking_back_what_no_one_asked_changes_nothing() -> None:
    nothing = withdrawal(None, asker=PERSON, machine="garage", name="qwen")
    assert not nothing.changed
    assert nothing.sentence == "no copy of qwen is asked of garage; nothing to take back"
    theirs = withdrawal(asked(CHAT), asker=PERSON, machine="garage", name="qwen")
    assert not theirs.changed
    assert theirs.sentence == (
        "a person did not ask garage for a copy of qwen; it stays, asked by the recovery of chat"
    )


@given(st.lists(st.sampled_from([PERSON, CHAT, recovery_asker("embed")]), max_size=6))
def test_a_request_is_held_exactly_by_those_who_asked_and_did_not_take_it_back(
    steps: list[str],
) -> None:
    requests: tuple[CopyRequest, ...] = ()
    holders: set[str] = set()
    for i, asker in enumerate(steps):
        if asker in holders:
            requests = without_ask(requests, machine="garage", artifact=QWEN, asker=asker)
            holders.discard(asker)
        else:
            requests = with_ask(
                requests, machine="garage", artifact=QWEN, name="qwen", asker=asker,
                at=T0 + timedelta(seconds=i),
            )  # fmt: skip
            holders.add(asker)
    found = find_request(requests, "garage", QWEN)
    assert (set() if found is None else {a.asker for a in found.askers}) == holders


# -- the state shown


def test_no_report_yet_is_requested() -> None:
    shown = copy_status(asked(PERSON), None)
    assert shown.state is CopyState.REQUESTED and shown.reported_at is None
    assert shown.sentence == "garage has not reported yet; its agent takes the request up"


def test_a_report_that_does_not_mention_it_is_requested() -> None:
    shown = copy_status(asked(PERSON), report())
    assert shown.state is CopyState.REQUESTED
    assert shown.sentence == "garage's agent takes the request up at its next round"


@pytest.mark.parametrize(
    ("reported", "state", "sentence"),
    [
        (
            progress(CopyPhase.WAITING, reason="waiting behind llama: one fetch at a time"),
            CopyState.WAITING,
            "waiting behind llama: one fetch at a time",
        ),
        (
            progress(CopyPhase.FETCHING, bytes_done=1, bytes_total=4),
            CopyState.FETCHING,
            "fetching from the model's publisher: 25% arrived",
        ),
        (
            progress(CopyPhase.FETCHING, bytes_done=3, bytes_total=4, reason="a cut"),
            CopyState.FETCHING,
            "fetching from the model's publisher: 75% arrived; resumed after a cut",
        ),
        (
            progress(CopyPhase.VERIFYING, bytes_done=4, bytes_total=4),
            CopyState.VERIFYING,
            "every byte arrived; each file's SHA-256 is checked before it counts",
        ),
        (
            progress(CopyPhase.FAILED, reason="model.gguf: wrong bytes"),
            CopyState.FAILED,
            "model.gguf: wrong bytes; not retried: take the request back (nodeau models copy "
            "qwen --to garage --remove) and ask again",
        ),
        (progress(CopyPhase.NOT_FETCHED), CopyState.REQUESTED, imported_sentence("garage")),
    ],
)
def test_the_agents_progress_is_the_state(
    reported: CopyProgress, state: CopyState, sentence: str
) -> None:
    shown = copy_status(asked(PERSON), report(reported))
    assert (shown.state, shown.sentence) == (state, sentence)
    assert shown.reported_at == T0 + timedelta(hours=1)


def test_ready_is_the_artifact_listed_verified_whatever_else_the_report_says() -> None:
    failed = progress(CopyPhase.FAILED, reason="old news")
    shown = copy_status(asked(PERSON), report(failed, verified={QWEN: ("qwen",)}))
    assert shown.state is CopyState.READY and shown.settled
    assert shown.sentence == "verified on garage: every file's SHA-256 checked there"


def test_progress_on_an_earlier_request_is_not_this_ones() -> None:
    again = evolve(asked(PERSON), since=T0 + timedelta(minutes=30))  # taken back, made again
    failed = progress(CopyPhase.FAILED, reason="wrong bytes")
    assert copy_status(again, report(failed)).state is CopyState.REQUESTED


def test_bytes_are_shown_once_known() -> None:
    shown = copy_status(
        asked(PERSON), report(progress(CopyPhase.FETCHING, bytes_done=2, bytes_total=8))
    )
    assert (shown.bytes_done, shown.bytes_total) == (2, 8)
    waiting = copy_status(asked(PERSON), report(progress(CopyPhase.WAITING)))
    assert (waiting.bytes_done, waiting.bytes_total) == (None, None)


def test_every_copy_lists_requests_and_verified_models_no_one_asked_for() -> None:
    garage = report(verified={QWEN: ("qwen",), OWN: ()})
    attic = MachineCopies(machine="attic", at=T0, verified={}, progress=())
    listed = copy_statuses((asked(PERSON), asked(CHAT, machine="attic")), (garage, attic))
    assert [(c.machine, c.name, c.state, c.askers) for c in listed] == [
        ("attic", "qwen", CopyState.REQUESTED, (CHAT,)),
        ("garage", OWN[:12], CopyState.READY, ()),
        ("garage", "qwen", CopyState.READY, (PERSON,)),
    ]
    own = listed[1]
    assert own.sentence == "verified on garage (pulled or imported there; no one asked for it)"


def test_the_sentence_of_an_ask() -> None:
    fresh = copy_status(asked(PERSON), None)
    assert asked_sentence(fresh, already=False, fetchable=True, short_id="aaaaaaaaaaaa") == (
        "a copy of qwen (aaaaaaaaaaaa) on garage is asked for: its agent fetches it from the "
        "model's publisher and checks every file's SHA-256 before it counts (nodeau models "
        "copies shows how it goes)"
    )
    assert asked_sentence(fresh, already=False, fetchable=False, short_id="aaaaaaaaaaaa") == (
        f"a copy of qwen (aaaaaaaaaaaa) on garage is asked for; {imported_sentence('garage')}"
    )
    ready = copy_status(asked(PERSON), report(verified={QWEN: ("qwen",)}))
    assert asked_sentence(ready, already=False, fetchable=True, short_id="a") == (
        "a copy of qwen (a) on garage is asked for; it is verified there already, nothing to fetch"
    )
    assert asked_sentence(ready, already=True, fetchable=True, short_id="a").startswith(
        "a copy of qwen (a) on garage was already asked for; it is ready: verified on garage"
    )


# -- what an agent fetches, and when it gives up


def test_the_oldest_fetchable_request_goes_first() -> None:
    llama = asked(PERSON, artifact=LLAMA)
    qwen = evolve(asked(PERSON), since=T0 + timedelta(minutes=1))
    own = evolve(asked(PERSON, artifact=OWN), since=T0 - timedelta(minutes=1))
    everything = (llama, qwen, own)
    fetchable = {QWEN, LLAMA}
    assert next_fetch(everything, fetchable=fetchable, verified=(), failed=()) == llama
    assert next_fetch(everything, fetchable=fetchable, verified={LLAMA}, failed=()) == qwen
    failed = {(LLAMA, llama.since)}
    assert next_fetch(everything, fetchable=fetchable, verified=(), failed=failed) == qwen
    assert next_fetch(everything, fetchable=fetchable, verified={QWEN, LLAMA}, failed=()) is None


def test_an_interrupted_fetch_is_tried_a_few_times_without_progress() -> None:
    assert [resume_fetch(n) for n in range(TRIES_WITHOUT_PROGRESS + 1)] == [
        *([True] * TRIES_WITHOUT_PROGRESS),
        False,
    ]


def test_a_recovery_ask_after_a_persons_on_the_same_copy_is_still_taken_back() -> None:
    both = asked_at(("attic", ART, "person"), ("attic", ART, "recovery:gone"))
    assert [a.asker for a in both[0].askers] == ["person", "recovery:gone"]
    asks = copy_asks([], both, lambda _n: "attic")
    assert (asks.add, asks.withdraw) == ((), (("attic", ART, "recovery:gone"),))


def test_a_service_that_needs_no_copy_does_not_stop_the_next_from_asking() -> None:
    covered = need(workload="first", verified_on=frozenset({"shed"}))  # a copy where it fits
    uncovered = need(workload="second")
    asks = copy_asks([covered, uncovered], (), lambda _n: "attic")
    assert asks.add == (("attic", ART, "qwen", "recovery:second"),)
