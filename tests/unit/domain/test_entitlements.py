"""Entitlements: only a valid, matching, current entitlement leaves the Home plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.entitlements import (
    Entitlement,
    EntitlementReason,
    EntitlementStatus,
    SignatureVerdict,
    effective_terms,
    in_window,
    is_aware,
    verdict_refusal,
)
from nodeau.domain.plans import HOME, PRO, PROTECTIONS, Feature, PlanName, PlanTerms

START = datetime(2025, 1, 1, tzinfo=UTC)
END = datetime(2026, 1, 1, tzinfo=UTC)
INSIDE = datetime(2025, 6, 1, tzinfo=UTC)
HERE = "inst-here"
HOME_TAIL = "; running on the free Home plan."


def pro(**changes: object) -> Entitlement:
    """A Pro entitlement for this installation, valid through 2025, with ``changes`` applied."""
    base = Entitlement(
        installation_id=HERE,
        plan=PlanName.PRO,
        not_before=START,
        not_after=END,
        issuer_key_id="key-2025",
    )
    return evolve(base, **changes)  # type: ignore[arg-type]


aware_times = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)
entitlements = st.builds(
    Entitlement,
    installation_id=st.sampled_from([HERE, "inst-other"]),
    plan=st.sampled_from(PlanName),
    features_added=st.frozensets(st.sampled_from(Feature)),
    max_machines=st.none() | st.integers(min_value=1, max_value=500),
    max_gpus=st.none() | st.integers(min_value=1, max_value=5_000),
    not_before=aware_times,
    not_after=aware_times,
    issuer_key_id=st.sampled_from(["key-2025", "key-old"]),
)
verdicts = st.none() | st.sampled_from(SignatureVerdict)


def test_codes_are_stable() -> None:
    assert [v.value for v in SignatureVerdict] == [
        "valid",
        "bad-signature",
        "unknown-key",
        "malformed",
    ]
    assert [r.value for r in EntitlementReason] == [
        "accepted",
        "none-present",
        "not-verified",
        "bad-signature",
        "unknown-key",
        "malformed",
        "other-installation",
        "not-yet-valid",
        "expired",
    ]


def test_accepted_entitlement_gives_its_plan() -> None:
    status = effective_terms(pro(), SignatureVerdict.VALID, HERE, INSIDE)
    assert status == EntitlementStatus(
        terms=PRO,
        reason=EntitlementReason.ACCEPTED,
        sentence="Running on the Pro plan, entitled until 2026-01-01T00:00:00+00:00.",
    )
    assert status.accepted is True
    assert status.protections == PROTECTIONS


def test_extras_and_overrides_apply() -> None:
    entitlement = pro(features_added=frozenset({Feature.SSO}), max_machines=20, max_gpus=100)
    assert effective_terms(entitlement, SignatureVerdict.VALID, HERE, INSIDE).terms == PlanTerms(
        name=PlanName.PRO,
        features=frozenset({Feature.AUTOMATIC_RECOVERY, Feature.CLOUD_FLEET_VIEW, Feature.SSO}),
        max_machines=20,
        max_gpus=100,
    )


@pytest.mark.parametrize(
    ("machines", "gpus", "expected"),
    [(None, None, (8, 64)), (3, None, (3, 64)), (None, 7, (8, 7)), (1, 1, (1, 1))],
)
def test_overrides_replace_only_what_they_name(
    machines: int | None, gpus: int | None, expected: tuple[int, int]
) -> None:
    terms = pro(max_machines=machines, max_gpus=gpus).terms()
    assert (terms.max_machines, terms.max_gpus) == expected
    assert terms.features == PRO.features


@pytest.mark.parametrize(
    ("entitlement", "verdict", "installation", "now", "reason", "why"),
    [
        (None, None, HERE, INSIDE, EntitlementReason.NONE_PRESENT, "No entitlement is installed"),
        (
            pro(),
            None,
            HERE,
            INSIDE,
            EntitlementReason.NOT_VERIFIED,
            "The entitlement's signature has not been checked",
        ),
        (
            pro(),
            SignatureVerdict.BAD_SIGNATURE,
            HERE,
            INSIDE,
            EntitlementReason.BAD_SIGNATURE,
            "The entitlement's signature does not verify",
        ),
        (
            None,
            SignatureVerdict.BAD_SIGNATURE,
            HERE,
            INSIDE,
            EntitlementReason.BAD_SIGNATURE,
            "The entitlement's signature does not verify",
        ),
        (
            pro(),
            SignatureVerdict.UNKNOWN_KEY,
            HERE,
            INSIDE,
            EntitlementReason.UNKNOWN_KEY,
            "The entitlement is signed by key key-2025, which this build does not know",
        ),
        (
            None,
            SignatureVerdict.UNKNOWN_KEY,
            HERE,
            INSIDE,
            EntitlementReason.UNKNOWN_KEY,
            "The entitlement is signed by a key which this build does not know",
        ),
        (
            None,
            SignatureVerdict.MALFORMED,
            HERE,
            INSIDE,
            EntitlementReason.MALFORMED,
            "The entitlement could not be read",
        ),
        (
            pro(),
            SignatureVerdict.MALFORMED,
            "inst-other",
            END,
            EntitlementReason.MALFORMED,
            "The entitlement could not be read",
        ),
        (
            pro(),
            SignatureVerdict.VALID,
            "inst-other",
            INSIDE,
            EntitlementReason.OTHER_INSTALLATION,
            "The Pro entitlement was issued for installation inst-here, not this one (inst-other)",
        ),
        (
            pro(),
            SignatureVerdict.VALID,
            "inst-other",
            END,
            EntitlementReason.OTHER_INSTALLATION,
            "The Pro entitlement was issued for installation inst-here, not this one (inst-other)",
        ),
        (
            pro(),
            SignatureVerdict.VALID,
            HERE,
            START - timedelta(microseconds=1),
            EntitlementReason.NOT_YET_VALID,
            "The Pro entitlement is not valid until 2025-01-01T00:00:00+00:00",
        ),
        (
            pro(),
            SignatureVerdict.VALID,
            HERE,
            END,
            EntitlementReason.EXPIRED,
            "The Pro entitlement expired at 2026-01-01T00:00:00+00:00",
        ),
        (
            pro(not_before=END, not_after=START),
            SignatureVerdict.VALID,
            HERE,
            INSIDE,
            EntitlementReason.NOT_YET_VALID,
            "The Pro entitlement is not valid until 2026-01-01T00:00:00+00:00",
        ),
    ],
)
def test_every_refusal_means_exactly_home(
    entitlement: Entitlement | None,
    verdict: SignatureVerdict | None,
    installation: str,
    now: datetime,
    reason: EntitlementReason,
    why: str,
) -> None:
    status = effective_terms(entitlement, verdict, installation, now)
    assert status == EntitlementStatus(terms=HOME, reason=reason, sentence=why + HOME_TAIL)
    assert status.accepted is False
    assert status.protections == PROTECTIONS


@pytest.mark.parametrize(
    ("now", "accepted"),
    [
        (START - timedelta(microseconds=1), False),
        (START, True),
        (INSIDE, True),
        (END - timedelta(microseconds=1), True),
        (END, False),
        (datetime(2025, 1, 1, 5, 29, tzinfo=timezone(timedelta(hours=5, minutes=30))), False),
        (datetime(2025, 1, 1, 5, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))), True),
    ],
)
def test_window_is_half_open_and_zone_aware(now: datetime, accepted: bool) -> None:
    assert in_window(pro(), now) is accepted
    assert effective_terms(pro(), SignatureVerdict.VALID, HERE, now).accepted is accepted


def test_valid_verdict_without_entitlement_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"^a valid verdict needs the entitlement it verified$"):
        effective_terms(None, SignatureVerdict.VALID, HERE, INSIDE)


def test_naive_now_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"^now must carry a time zone$"):
        effective_terms(None, None, HERE, datetime(2025, 6, 1))


@pytest.mark.parametrize("field_name", ["not_before", "not_after"])
def test_entitlement_times_must_carry_a_zone(field_name: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^{field_name} must be a timezone-aware moment, got .*$"
    ):
        pro(**{field_name: datetime(2025, 6, 1)})


@pytest.mark.parametrize("field_name", ["max_machines", "max_gpus"])
@pytest.mark.parametrize("bad", [0, -3])
def test_entitlement_overrides_must_be_positive(field_name: str, bad: int) -> None:
    with pytest.raises(ValueError, match=rf"^{field_name} must be positive or absent, got {bad}$"):
        pro(**{field_name: bad})


@pytest.mark.parametrize("installation", ["", "   "])
def test_entitlement_names_an_installation(installation: str) -> None:
    message = r"^an entitlement names the installation it was issued for$"
    with pytest.raises(ValueError, match=message):
        pro(installation_id=installation)


@pytest.mark.parametrize(
    ("moment", "aware"),
    [
        (datetime(2025, 1, 1), False),
        (datetime(2025, 1, 1, tzinfo=UTC), True),
        (datetime(2025, 1, 1, tzinfo=timezone(timedelta(hours=-4))), True),
    ],
)
def test_is_aware(moment: datetime, aware: bool) -> None:
    assert is_aware(moment) is aware


class _NoOffset(tzinfo):
    """A time zone that cannot say its offset: as unusable as no time zone."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


def test_a_zone_without_an_offset_is_not_aware() -> None:
    assert is_aware(datetime(2025, 1, 1, tzinfo=_NoOffset())) is False


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (SignatureVerdict.VALID, None),
        (
            SignatureVerdict.BAD_SIGNATURE,
            (EntitlementReason.BAD_SIGNATURE, "The entitlement's signature does not verify"),
        ),
        (
            SignatureVerdict.UNKNOWN_KEY,
            (
                EntitlementReason.UNKNOWN_KEY,
                "The entitlement is signed by key key-2025, which this build does not know",
            ),
        ),
        (
            SignatureVerdict.MALFORMED,
            (EntitlementReason.MALFORMED, "The entitlement could not be read"),
        ),
    ],
)
def test_verdict_refusal(
    verdict: SignatureVerdict, expected: tuple[EntitlementReason, str] | None
) -> None:
    assert verdict_refusal(verdict, pro()) == expected


def test_status_cannot_claim_more_than_home_unless_accepted() -> None:
    message = r"^an entitlement that was not accepted means the Home plan$"
    with pytest.raises(ValueError, match=message):
        EntitlementStatus(terms=PRO, reason=EntitlementReason.EXPIRED, sentence="x")


def test_home_fallback_needs_a_real_reason() -> None:
    with pytest.raises(ValueError, match=r"^the Home fallback needs a reason other than accepted$"):
        EntitlementStatus.home(EntitlementReason.ACCEPTED, "x")


def test_accepted_home_entitlement_is_accepted() -> None:
    status = effective_terms(pro(plan=PlanName.HOME), SignatureVerdict.VALID, HERE, INSIDE)
    assert status.terms == HOME
    assert status.accepted is True
    assert status.reason is EntitlementReason.ACCEPTED


@given(entitlements, verdicts, st.sampled_from([HERE, "inst-other"]), aware_times)
def test_accepted_exactly_when_valid_matching_and_current(
    entitlement: Entitlement, verdict: SignatureVerdict | None, installation: str, now: datetime
) -> None:
    status = effective_terms(entitlement, verdict, installation, now)
    acceptable = (
        verdict is SignatureVerdict.VALID
        and entitlement.installation_id == installation
        and entitlement.not_before <= now < entitlement.not_after
    )
    assert status.accepted is acceptable
    assert status.terms == (entitlement.terms() if acceptable else HOME)
    assert status.protections == PROTECTIONS


@given(
    entitlements,
    st.sampled_from(
        [SignatureVerdict.BAD_SIGNATURE, SignatureVerdict.UNKNOWN_KEY, SignatureVerdict.MALFORMED]
    ),
    st.sampled_from([HERE, "inst-other"]),
    aware_times,
)
def test_any_non_valid_verdict_is_exactly_home(
    entitlement: Entitlement, verdict: SignatureVerdict, installation: str, now: datetime
) -> None:
    status = effective_terms(entitlement, verdict, installation, now)
    assert status.terms == HOME
    assert status.reason.value == verdict.value
    assert status.sentence.endswith(HOME_TAIL)


@given(entitlements, aware_times)
def test_another_installation_is_exactly_home(entitlement: Entitlement, now: datetime) -> None:
    status = effective_terms(entitlement, SignatureVerdict.VALID, "inst-elsewhere", now)
    assert status.terms == HOME
    assert status.reason is EntitlementReason.OTHER_INSTALLATION


@given(entitlements, aware_times)
def test_outside_the_window_is_exactly_home(entitlement: Entitlement, now: datetime) -> None:
    matching = evolve(entitlement, installation_id=HERE)
    status = effective_terms(matching, SignatureVerdict.VALID, HERE, now)
    if now < matching.not_before:
        assert (status.terms, status.reason) == (HOME, EntitlementReason.NOT_YET_VALID)
    elif now >= matching.not_after:
        assert (status.terms, status.reason) == (HOME, EntitlementReason.EXPIRED)
    else:
        assert (status.terms, status.reason) == (matching.terms(), EntitlementReason.ACCEPTED)
