"""Plans: the table's exact terms, fleet-size refusals, features, and protections on every plan."""

from __future__ import annotations

import itertools

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st
from returns.pipeline import is_successful
from returns.result import Failure, Success

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import (
    ENTERPRISE,
    HOME,
    PLAN_ORDER,
    PLANS,
    PRO,
    PROTECTIONS,
    TEAM,
    Feature,
    PlanName,
    PlanTerms,
    Protection,
    bound_covers,
    cheapest_plan_with,
    coverage_order,
    plan_allows_fleet_size,
    plan_covers,
    plan_has,
    plan_scope,
    plan_title,
    protections_for,
    within,
)
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView, schedule
from tests.support.builders.fleets import flat, fleet, gpu, machine

bounds = st.none() | st.integers(min_value=1, max_value=1_000)
terms_strategy = st.builds(
    PlanTerms,
    name=st.sampled_from(PlanName),
    features=st.frozensets(st.sampled_from(Feature)),
    max_machines=bounds,
    max_gpus=bounds,
)


def bounded(plan: PlanName, field_name: str, value: int) -> PlanTerms:
    """Terms for ``plan`` with only the bound called ``field_name`` set to ``value``."""
    if field_name == "max_machines":
        return PlanTerms(name=plan, max_machines=value)
    return PlanTerms(name=plan, max_gpus=value)


def test_enum_values_are_the_stable_codes() -> None:
    assert [p.value for p in PlanName] == ["home", "pro", "team", "enterprise"]
    assert [f.value for f in Feature] == [
        "automatic-recovery",
        "organisation-limits",
        "cloud-fleet-view",
        "sso",
        "audit-export",
    ]
    assert [p.value for p in Protection] == [
        "admission",
        "artifact-verification",
        "authentication",
        "integrity-checks",
    ]
    assert PLAN_ORDER == (PlanName.HOME, PlanName.PRO, PlanName.TEAM, PlanName.ENTERPRISE)


def test_protections_are_every_protection() -> None:
    assert (
        frozenset(
            {
                Protection.ADMISSION,
                Protection.ARTIFACT_VERIFICATION,
                Protection.AUTHENTICATION,
                Protection.INTEGRITY_CHECKS,
            }
        )
        == PROTECTIONS
    )


@pytest.mark.parametrize("plan", list(PlanName))
def test_every_plan_gets_every_protection(plan: PlanName) -> None:
    assert protections_for(plan) == PROTECTIONS
    assert protections_for(plan) == protections_for(PlanName.HOME)


def test_no_feature_is_a_protection() -> None:
    assert {f.value for f in Feature}.isdisjoint({p.value for p in Protection})


@pytest.mark.parametrize(
    ("plan", "features", "machines", "gpus"),
    [
        (PlanName.HOME, frozenset({Feature.AUTOMATIC_RECOVERY}), 2, 8),
        (
            PlanName.PRO,
            frozenset({Feature.AUTOMATIC_RECOVERY, Feature.CLOUD_FLEET_VIEW}),
            8,
            64,
        ),
        (
            PlanName.TEAM,
            frozenset(
                {
                    Feature.AUTOMATIC_RECOVERY,
                    Feature.CLOUD_FLEET_VIEW,
                    Feature.ORGANISATION_LIMITS,
                    Feature.AUDIT_EXPORT,
                }
            ),
            64,
            512,
        ),
        (PlanName.ENTERPRISE, frozenset(Feature), None, None),
    ],
)
def test_plan_table(
    plan: PlanName, features: frozenset[Feature], machines: int | None, gpus: int | None
) -> None:
    assert PLANS[plan] == PlanTerms(
        name=plan, features=features, max_machines=machines, max_gpus=gpus
    )


def test_plan_constants_are_the_table() -> None:
    assert tuple(PLANS[p] for p in PLAN_ORDER) == (HOME, PRO, TEAM, ENTERPRISE)
    assert list(PLANS) == list(PlanName)


@pytest.mark.parametrize("field_name", ["max_machines", "max_gpus"])
@pytest.mark.parametrize("bad", [0, -1])
def test_plan_bounds_must_be_positive(field_name: str, bad: int) -> None:
    with pytest.raises(ValueError, match=rf"^{field_name} must be positive or absent, got {bad}$"):
        bounded(PlanName.HOME, field_name, bad)


def test_plan_bound_of_one_is_fine_and_default_is_unbounded() -> None:
    terms = PlanTerms(name=PlanName.HOME, max_machines=1, max_gpus=1)
    assert (terms.max_machines, terms.max_gpus) == (1, 1)
    default = PlanTerms(name=PlanName.PRO)
    assert (default.features, default.max_machines, default.max_gpus) == (frozenset(), None, None)


@pytest.mark.parametrize(
    ("plan", "title"),
    [
        (PlanName.HOME, "Home"),
        (PlanName.PRO, "Pro"),
        (PlanName.TEAM, "Team"),
        (PlanName.ENTERPRISE, "Enterprise"),
    ],
)
def test_plan_title(plan: PlanName, title: str) -> None:
    assert plan_title(plan) == title


@pytest.mark.parametrize(
    ("bound", "value", "expected"),
    [(None, 10**9, True), (3, 2, True), (3, 3, True), (3, 4, False), (1, 0, True)],
)
def test_within(bound: int | None, value: int, expected: bool) -> None:
    assert within(bound, value) is expected


@pytest.mark.parametrize(
    ("bigger", "smaller", "expected"),
    [
        (None, None, True),
        (None, 5, True),
        (5, None, False),
        (5, 5, True),
        (5, 4, True),
        (4, 5, False),
    ],
)
def test_bound_covers(bigger: int | None, smaller: int | None, expected: bool) -> None:
    assert bound_covers(bigger, smaller) is expected


@pytest.mark.parametrize(("smaller", "bigger"), list(itertools.pairwise(PLAN_ORDER)))
def test_each_plan_covers_the_one_below_and_not_the_reverse(
    smaller: PlanName, bigger: PlanName
) -> None:
    assert plan_covers(PLANS[bigger], PLANS[smaller]) is True
    assert plan_covers(PLANS[smaller], PLANS[bigger]) is False


def test_plan_covers_needs_every_feature() -> None:
    more = PlanTerms(name=PlanName.PRO, features=frozenset({Feature.SSO}))
    assert plan_covers(more, PlanTerms(name=PlanName.HOME)) is True
    assert plan_covers(PlanTerms(name=PlanName.HOME), more) is False


@pytest.mark.parametrize(
    ("field_name", "bigger", "smaller", "expected"),
    [("max_machines", 3, 4, False), ("max_gpus", 3, 4, False), ("max_gpus", 4, 3, True)],
)
def test_plan_covers_checks_each_bound(
    field_name: str, bigger: int, smaller: int, expected: bool
) -> None:
    big = bounded(PlanName.PRO, field_name, bigger)
    small = bounded(PlanName.HOME, field_name, smaller)
    assert plan_covers(big, small) is expected


@given(terms_strategy)
def test_plan_covers_itself_and_enterprise_covers_everything(terms: PlanTerms) -> None:
    assert plan_covers(terms, terms) is True
    assert plan_covers(ENTERPRISE, terms) is True


@pytest.mark.parametrize(
    ("feature", "plan"),
    [
        (Feature.AUTOMATIC_RECOVERY, PlanName.HOME),  # every plan recovers
        (Feature.CLOUD_FLEET_VIEW, PlanName.PRO),
        (Feature.ORGANISATION_LIMITS, PlanName.TEAM),
        (Feature.AUDIT_EXPORT, PlanName.TEAM),
        (Feature.SSO, PlanName.ENTERPRISE),
    ],
)
def test_cheapest_plan_with(feature: Feature, plan: PlanName) -> None:
    assert cheapest_plan_with(feature) is plan


@pytest.mark.parametrize(
    ("terms", "machines", "gpus", "expected"),
    [
        (HOME, 0, 0, None),
        (HOME, 1, 1, None),
        (HOME, 2, 8, None),
        (
            HOME,
            3,
            1,
            (
                ReasonCode.MACHINES_OVER_PLAN,
                "The Home plan covers 2 machines and this fleet would have 3.",
            ),
        ),
        (
            HOME,
            2,
            9,
            (ReasonCode.GPUS_OVER_PLAN, "The Home plan covers 8 GPUs and this fleet would have 9."),
        ),
        (
            HOME,
            3,
            9,
            (
                ReasonCode.MACHINES_OVER_PLAN,
                "The Home plan covers 2 machines and this fleet would have 3.",
            ),
        ),
        (PRO, 8, 64, None),
        (
            PRO,
            9,
            64,
            (
                ReasonCode.MACHINES_OVER_PLAN,
                "The Pro plan covers 8 machines and this fleet would have 9.",
            ),
        ),
        (
            TEAM,
            64,
            513,
            (
                ReasonCode.GPUS_OVER_PLAN,
                "The Team plan covers 512 GPUs and this fleet would have 513.",
            ),
        ),
        (ENTERPRISE, 10_000, 100_000, None),
    ],
)
def test_plan_allows_fleet_size(
    terms: PlanTerms, machines: int, gpus: int, expected: tuple[ReasonCode, str] | None
) -> None:
    outcome = plan_allows_fleet_size(terms, machines, gpus)
    match outcome:
        case Success(value):
            assert expected is None
            assert value is None
        case Failure(refusal):
            assert expected is not None
            assert refusal == Refusal(
                kind=RefusalKind.LIMIT, code=expected[0], sentence=expected[1]
            )


@pytest.mark.parametrize(("machines", "gpus"), [(-1, 0), (0, -1)])
def test_negative_fleet_is_a_programming_error(machines: int, gpus: int) -> None:
    message = f"^a fleet cannot have {machines} machines or {gpus} GPUs$"
    with pytest.raises(ValueError, match=message):
        plan_allows_fleet_size(HOME, machines, gpus)


def counts_covered(bound: int | None, largest: int) -> set[int]:
    """Every count from 0 to ``largest`` a plan's bound lets through (None bounds nothing),
    listed one by one: the oracle of the property below."""
    return {n for n in range(largest + 1) if bound is None or n <= bound}


@given(
    terms_strategy,
    st.integers(min_value=0, max_value=2_000),
    st.integers(min_value=0, max_value=2_000),
)
def test_fleet_size_refusals_are_limits_and_match_the_bounds(
    terms: PlanTerms, machines: int, gpus: int
) -> None:
    machines_fit = machines in counts_covered(terms.max_machines, 2_000)
    gpus_fit = gpus in counts_covered(terms.max_gpus, 2_000)
    outcome = plan_allows_fleet_size(terms, machines, gpus)
    assert isinstance(outcome, Success) is (machines_fit and gpus_fit)
    if not (machines_fit and gpus_fit):
        refusal = outcome.failure()
        assert refusal.kind is RefusalKind.LIMIT
        # machines are checked first: adding a machine is the step a person takes
        expected = ReasonCode.GPUS_OVER_PLAN if machines_fit else ReasonCode.MACHINES_OVER_PLAN
        assert refusal.code is expected


@pytest.mark.parametrize("feature", list(Feature))
def test_enterprise_has_every_feature(feature: Feature) -> None:
    assert plan_has(ENTERPRISE, feature) == Success(None)


@pytest.mark.parametrize(
    ("terms", "feature", "sentence"),
    [
        (
            HOME,
            Feature.CLOUD_FLEET_VIEW,
            "The Home plan does not include cloud-fleet-view; the Pro plan does.",
        ),
        (
            PRO,
            Feature.ORGANISATION_LIMITS,
            "The Pro plan does not include organisation-limits; the Team plan does.",
        ),
        (TEAM, Feature.SSO, "The Team plan does not include sso; the Enterprise plan does."),
    ],
)
def test_plan_has_refuses_with_the_cheapest_plan_that_does(
    terms: PlanTerms, feature: Feature, sentence: str
) -> None:
    refusal = plan_has(terms, feature).failure()
    assert refusal == Refusal(
        kind=RefusalKind.LIMIT, code=ReasonCode.FEATURE_NOT_IN_PLAN, sentence=sentence
    )


@given(terms_strategy, st.sampled_from(Feature))
def test_plan_has_exactly_its_features(terms: PlanTerms, feature: Feature) -> None:
    outcome = plan_has(terms, feature)
    assert isinstance(outcome, Success) is (feature in terms.features)
    if feature not in terms.features:
        assert outcome.failure().code is ReasonCode.FEATURE_NOT_IN_PLAN
        assert outcome.failure().kind is RefusalKind.LIMIT


TWO_GPUS = PlanTerms(name=PlanName.PRO, max_gpus=2)


NO_LEDGER = Ledger()


def view(cards: Fleet, plan: PlanTerms, ledger: Ledger = NO_LEDGER) -> FleetView:
    return FleetView(
        fleet=cards,
        ledger=ledger,
        settings=SchedulingSettings(),
        excluded=(),
        verified_on=frozenset(m.name for m in cards.machines),
        predict=flat(8 * GIB),
        plan=plan,
    )


REQUEST = AdmissionRequest(
    workload="chat", model="qwen", artifact_id="ab" * 32, config=RuntimeConfig(context_tokens=4096)
)


# m1's cards A and B, the two the plan covers, held by other workloads
A_AND_B_HELD = Ledger(
    reservations=tuple(
        Reservation(workload=w, machine="m1", gpu_uuid=u, bytes=GIB)
        for w, u in (("a", "A"), ("b", "B"))
    )
)


def test_a_free_card_past_the_gpu_bound_is_refused_as_a_gpu_limit() -> None:
    cards = fleet(machine("m1", gpu("A"), gpu("B"), gpu("C")))
    refusal = schedule(REQUEST, view(cards, TWO_GPUS, A_AND_B_HELD)).failure()
    assert refusal.code is ReasonCode.GPUS_OVER_PLAN
    assert refusal.sentence == (
        "every card that can take qwen is beyond what the Pro plan covers (2 GPUs; on m1); "
        "an entitlement for a larger plan covers them (nodeau plan)"
    )


def test_a_machine_left_out_for_gpus_is_refused_as_a_gpu_limit() -> None:
    cards = fleet(machine("m1", gpu("A"), gpu("B")), machine("m2", gpu("C")))
    refusal = schedule(REQUEST, view(cards, TWO_GPUS, A_AND_B_HELD)).failure()
    assert refusal.code is ReasonCode.GPUS_OVER_PLAN
    assert "(2 GPUs; on m2)" in refusal.sentence


def test_an_uncovered_card_that_would_rank_first_is_never_chosen() -> None:
    # m1's first card is covered (one GPU on this plan); its second, smaller, would rank first
    cards = fleet(machine("m1", gpu("A", 24), gpu("B", 16)))
    one_gpu = PlanTerms(name=PlanName.PRO, max_gpus=1)
    placed = schedule(REQUEST, view(cards, one_gpu))
    assert is_successful(placed)
    assert placed.unwrap().placement.gpu_uuid == "A"
    everything = schedule(REQUEST, view(cards, PlanTerms(name=PlanName.PRO)))
    assert everything.unwrap().placement.gpu_uuid == "B"


HOME_TWO = evolve(HOME, max_machines=2, max_gpus=None)


def test_every_machine_past_the_machine_bound_is_named() -> None:
    scope = plan_scope(evolve(HOME, max_machines=1, max_gpus=None), [
        ("a", ("a0",)), ("b", ("b0",)), ("c", ("c0",)),
    ])  # fmt: skip
    assert scope.left_out == (
        ("b", "beyond the Home plan's 1 machines"),
        ("c", "beyond the Home plan's 1 machines"),
    )


def test_every_machine_past_the_gpu_bound_is_named_and_the_cards_left_out_add_up() -> None:
    scope = plan_scope(evolve(HOME, max_machines=None, max_gpus=2), [
        ("a", ("a0", "a1", "a2")), ("b", ()), ("c", ("c0",)), ("d", ("d0", "d1")),
    ])  # fmt: skip
    assert scope.covered_gpus == {"a0", "a1"}
    assert scope.left_out == (
        ("c", "beyond the Home plan's 2 GPUs"),
        ("d", "beyond the Home plan's 2 GPUs"),
    )
    assert scope.gpus_left_out == 1  # a2; b has none, c and d are left out whole


def test_machines_holding_work_count_first_then_those_taking_work_then_the_rest() -> None:
    order = coverage_order(["a", "b", "c", "d"], holding={"c"}, taking_work={"b", "c", "d"})
    assert order == ("c", "b", "d", "a")
    assert coverage_order(["b", "a"]) == ("a", "b")  # nothing known: name order


def test_a_covered_machine_that_stopped_answering_gives_its_slot_to_one_that_reports() -> None:
    four = [(m, (f"{m}0",)) for m in ("m1", "m2", "m3", "m4")]
    # m1 holds nothing now (its workload is moving) and stopped answering; m2 holds work
    scope = plan_scope(HOME_TWO, four, holding={"m2"}, taking_work={"m2", "m3", "m4"})
    assert scope.covered_gpus == {"m20", "m30"}
    assert dict(scope.left_out).keys() == {"m1", "m4"}
    # while m1 still holds work, it keeps its slot: nothing running is ever left out
    held = plan_scope(HOME_TWO, four, holding={"m1", "m2"}, taking_work={"m2", "m3", "m4"})
    assert held.covered_gpus == {"m10", "m20"}
