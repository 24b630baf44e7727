"""A copy as it is shown, figure by figure and word by word: percentages at their edges,
every field of a status, and who a request is still held by when several ask."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.copies import (
    PERSON,
    CopyPhase,
    CopyProgress,
    CopyRequest,
    CopyState,
    CopyStatus,
    MachineCopies,
    copy_status,
    copy_statuses,
    find_request,
    recovery_asker,
    with_ask,
    withdrawal,
)

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
REPORTED = T0 + timedelta(hours=1)
QWEN = "a" * 64
CHAT, EMBED = recovery_asker("chat"), recovery_asker("embed")


def asked(*askers: str) -> CopyRequest:
    made: tuple[CopyRequest, ...] = ()
    for i, asker in enumerate(askers):
        made = with_ask(
            made, machine="garage", artifact=QWEN, name="qwen", asker=asker,
            at=T0 + timedelta(minutes=i),
        )  # fmt: skip
    found = find_request(made, "garage", QWEN)
    assert found is not None
    return found


def reported(
    *progress: CopyProgress, verified: dict[str, tuple[str, ...]] | None = None
) -> MachineCopies:
    return MachineCopies(machine="garage", at=REPORTED, verified=verified or {}, progress=progress)


def fetching(done: int, total: int) -> CopyProgress:
    return CopyProgress(
        artifact=QWEN, since=T0, phase=CopyPhase.FETCHING, bytes_done=done, bytes_total=total
    )


@pytest.mark.parametrize(
    ("done", "total", "percent"),
    [(0, 1, 0), (1, 101, 0), (100, 101, 99), (5, 4, 100), (0, 0, 100), (7, 0, 100)],
)
def test_the_share_arrived_is_rounded_down_and_never_over_100(
    done: int, total: int, percent: int
) -> None:
    shown = copy_status(asked(PERSON), reported(fetching(done, total)))
    assert shown.sentence == f"fetching from the model's publisher: {percent}% arrived"


def test_a_status_read_from_a_report_carries_every_field() -> None:
    shown = copy_status(asked(PERSON, CHAT), reported(fetching(0, 1)))
    assert shown == CopyStatus(
        machine="garage",
        artifact=QWEN,
        name="qwen",
        state=CopyState.FETCHING,
        sentence="fetching from the model's publisher: 0% arrived",
        bytes_done=0,
        bytes_total=1,
        askers=(PERSON, CHAT),
        requested_at=T0,
        reported_at=REPORTED,
    )


def test_a_wait_the_agent_gave_no_reason_for_is_behind_another_fetch() -> None:
    waiting = CopyProgress(artifact=QWEN, since=T0, phase=CopyPhase.WAITING)
    shown = copy_status(asked(PERSON), reported(waiting))
    assert (shown.state, shown.sentence) == (
        CopyState.WAITING,
        "waiting behind another fetch: one fetch at a time on this machine",
    )


def test_a_verified_model_no_one_asked_for_is_named_by_its_first_name() -> None:
    (shown,) = copy_statuses((), (reported(verified={QWEN: ("qwen", "qwen-old")}),))
    assert shown == CopyStatus(
        machine="garage",
        artifact=QWEN,
        name="qwen",
        state=CopyState.READY,
        sentence="verified on garage (pulled or imported there; no one asked for it)",
        bytes_done=None,
        bytes_total=None,
        askers=(),
        requested_at=None,
        reported_at=REPORTED,
    )


def test_what_one_did_not_ask_stays_asked_by_every_other() -> None:
    theirs = withdrawal(asked(CHAT, EMBED), asker=PERSON, machine="garage", name="qwen")
    assert theirs.sentence == (
        "a person did not ask garage for a copy of qwen; it stays, asked by the recovery of "
        "chat, the recovery of embed"
    )


def test_every_recovery_that_relies_on_a_copy_is_named() -> None:
    done = withdrawal(asked(PERSON, CHAT, EMBED), asker=PERSON, machine="garage", name="qwen")
    assert done.sentence == (
        "your ask for a copy of qwen on garage is taken back, but the copy stays: the recovery "
        "of chat, embed relies on it; no file is deleted"
    )


def test_a_recovery_that_takes_its_ask_back_leaves_the_persons() -> None:
    done = withdrawal(asked(PERSON, CHAT), asker=CHAT, machine="garage", name="qwen")
    assert done.after is not None and done.changed
    assert done.sentence == (
        "your ask for a copy of qwen on garage is taken back; it stays, asked by a person; "
        "no file is deleted"
    )
