"""The one order of checks (qualification, model server, permission, limits, quotas, then
placement) and the decision it makes: the first refusal, or the placement's admission; a
later check, placement above all, is never asked once an earlier one refused."""

from __future__ import annotations

from datetime import UTC, datetime
from types import MappingProxyType

from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from nodeau.domain.decision import (
    MODEL_SERVER,
    PLACEMENT,
    QUALIFICATION,
    AskFacts,
    Checked,
    checks,
    decide,
    first_refusal,
)
from nodeau.domain.limits import OrgLimits, OrgQuota, RequestShape, Role
from nodeau.domain.organisation import Organisation, Requester, Spending
from nodeau.domain.records import Admission, Snapshot
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.tasks import Task
from tests.support.builders.admissions import decider, fleet_of

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
ALICE = Requester(user="alice", groups=frozenset({"ml"}))
SHAPE = RequestShape(model="qwen", artifact_id="ab" * 32, context_tokens=4096, model_bytes=10**9)
ORDER = (QUALIFICATION, MODEL_SERVER, "permission", "limit", "quota", PLACEMENT)
UNPROVED = Refusal.of(ReasonCode.TASK_NOT_PROVED, "qwen has not proved chat")
NO_CUDA = Refusal.of(ReasonCode.SERVER_CANNOT_USE_CARD, "this server is CPU only")
FULL = Refusal.of(ReasonCode.NO_CARD_LARGE_ENOUGH, "no card holds qwen (estimated)")


def admitted() -> Admission:
    """A real admission: the domain's placement of one workload on an empty machine."""
    empty = Snapshot(ledger=Ledger(), workloads=())
    return decider("qwen", fleet_of(1), NOW)(empty).unwrap()


ADMITTED = admitted()


class Placement:
    """A placement that counts how often it is asked."""

    def __init__(self, answer: Result[Admission, Refusal]) -> None:
        self.answer = answer
        self.asked = 0

    def __call__(self) -> Result[Admission, Refusal]:
        self.asked += 1
        return self.answer


def policy(role: Role, permitted: bool, max_context: int | None, quota: int | None) -> Organisation:
    return Organisation(
        everyone=role,
        limits=OrgLimits(
            max_context_tokens=max_context,
            allowed_models=None if permitted else frozenset({"another"}),
        ),
        user_quotas=MappingProxyType(
            {} if quota is None else {"alice": OrgQuota(max_workloads=quota)}
        ),
    )


asks = st.builds(
    lambda proved, unproved, server, role, permitted, max_context, quota, requester: AskFacts(
        shape=SHAPE,
        task=Task.CHAT,
        qualification=None if proved else UNPROVED,
        unproved=unproved,
        server=server,
        server_said=None if server is not None else "llama-server b1: CUDA",
        organisation=policy(role, permitted, max_context, quota),
        requester=requester,
    ),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, NO_CUDA]),
    st.sampled_from(list(Role)),
    st.booleans(),
    st.sampled_from([None, 1024, 8192]),
    st.sampled_from([None, 1, 5]),
    st.sampled_from([ALICE, None]),
)


@given(asks, st.booleans(), st.integers(min_value=0, max_value=3))
def test_the_decision_is_the_first_refusal_of_the_checks_or_the_placement(
    asked: AskFacts, fits: bool, held: int
) -> None:
    spent = [Spending(requester=ALICE)] * held
    place = Placement(Success(ADMITTED) if fits else Failure(FULL))
    found = tuple(checks(asked, spent, place))
    names = [c.check for c in found]
    # in the one order, each at most once (placement's refusal is named by its kind)
    ranks = [ORDER.index(n if n != "capacity" else PLACEMENT) for n in names]
    assert ranks == sorted(ranks) and names.count("permission") <= 2
    # every check but the last passed; the walk stops at the first refusal
    assert all(c.passed for c in found[:-1])
    # a refusal is said in its own words, a placement's by its kind (capacity)
    for c in found:
        if c.refusal is not None:
            assert c.sentence == c.refusal.sentence
        assert c.sentence
    if not fits and found[-1].refusal == FULL:
        assert found[-1].check == "capacity" and found[-1].admission is None
    refusal = first_refusal(found)
    again = Placement(place.answer)
    decided = decide(asked, spent, again)
    if refusal is None:
        assert decided == Success(ADMITTED) and found[-1].check == PLACEMENT
    else:
        assert decided == Failure(refusal)
    # placement is asked exactly when every earlier check passed
    before = [c for c in found if c.check not in (PLACEMENT, "capacity")]
    assert place.asked == (1 if all(c.passed for c in before) else 0) == again.asked


def test_each_check_refuses_in_its_turn() -> None:
    everything_wrong = AskFacts(
        shape=SHAPE,
        task=Task.CHAT,
        qualification=UNPROVED,
        server=NO_CUDA,
        organisation=policy(Role.VIEWER, False, 1024, 1),
        requester=ALICE,
    )
    place = Placement(Failure(FULL))
    spent = [Spending(requester=ALICE)]
    assert decide(everything_wrong, spent, place) == Failure(UNPROVED)
    served_unproved = evolve(everything_wrong, unproved=True)
    assert decide(served_unproved, spent, place) == Failure(NO_CUDA)
    on_cpu = evolve(served_unproved, server=None, server_said="CPU asked")
    codes = []
    for org in (
        policy(Role.VIEWER, False, 1024, 1),
        policy(Role.OPERATOR, False, 1024, 1),
        policy(Role.OPERATOR, True, 1024, 1),
        policy(Role.OPERATOR, True, None, 1),
    ):
        decided = decide(evolve(on_cpu, organisation=org), spent, place)
        codes.append(decided.failure().code)
    assert codes == [
        ReasonCode.ROLE_MAY_NOT,
        ReasonCode.MODEL_NOT_PERMITTED,
        ReasonCode.CONTEXT_OVER_LIMIT,
        ReasonCode.WORKLOAD_QUOTA_EXHAUSTED,
    ]
    assert place.asked == 0
    room = evolve(on_cpu, organisation=policy(Role.OPERATOR, True, None, 2))
    assert decide(room, spent, place) == Failure(FULL) and place.asked == 1
    # the placement's refusal is the last check, named by its kind
    last = list(checks(room, spent, Placement(Failure(FULL))))[-1]
    assert (last.check, last.refusal) == (FULL.kind.value, FULL)


def test_a_request_nobody_is_named_for_passes_only_where_no_policy_is_configured() -> None:
    unnamed = AskFacts(
        shape=SHAPE,
        task=Task.CHAT,
        qualification=None,
        organisation=Organisation(everyone=Role.ADMIN),
        requester=None,
    )
    refused = decide(unnamed, [], Placement(Success(ADMITTED)))
    assert refused.failure().code is ReasonCode.REQUESTER_UNKNOWN
    free = evolve(unnamed, organisation=Organisation.none())
    assert decide(free, [], Placement(Success(ADMITTED))) == Success(ADMITTED)
    said = {c.check: c.sentence for c in checks(free, [], None)}
    assert said["permission"] == "the organisation permits qwen"  # the second permission
    assert said["quota"] == "no quota is counted for a request nobody is named for"
    first = next(iter(checks(evolve(free, unproved=True), [], None)))
    assert (first.check, first.sentence) == (
        "permission",
        "no organisation policy is configured: whoever asks may run",
    )


def test_explain_reads_each_check_in_words_and_the_placement_last() -> None:
    asked = AskFacts(
        shape=SHAPE,
        task=Task.CHAT,
        qualification=None,
        server_said="llama-server b1: CUDA (CUDA0 NVIDIA H200, 139.8 GiB)",
        organisation=Organisation.none(),
        requester=ALICE,
    )
    found = list(checks(asked, [], Placement(Success(ADMITTED))))
    assert [(c.check, c.sentence) for c in found] == [
        (QUALIFICATION, "qwen is claimed or proved for chat"),
        (MODEL_SERVER, "llama-server b1: CUDA (CUDA0 NVIDIA H200, 139.8 GiB)"),
        ("permission", "alice (admin) may run"),
        ("permission", "the organisation permits qwen"),
        (
            "limit",
            "a context of 4096 tokens and 1000000000 bytes of model are within the "
            "organisation's limits",
        ),
        ("quota", "alice's quotas and their teams' have room"),
        (PLACEMENT, ADMITTED.placement.why),
    ]
    assert found[-1] == Checked(
        check=PLACEMENT, refusal=None, sentence=ADMITTED.placement.why, admission=ADMITTED
    )
    assert first_refusal(found) is None
    # where another places it (a fleet's controller), the checks end before placement
    assert [c.check for c in checks(asked, [], None)][-1] == "quota"
    # without a word from the model server, its check is not made here (the fleet's
    # controller leaves out the machines whose server cannot use their cards)
    assert MODEL_SERVER not in [c.check for c in checks(evolve(asked, server_said=None), [], None)]
