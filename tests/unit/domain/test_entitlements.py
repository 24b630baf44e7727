"""Entitlements: only a valid, matching, current entitlement leaves the Home plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.entitlements import (
    TIMING,
    Entitlement,
    EntitlementReason,
    EntitlementStatus,
    SignatureVerdict,
    Timing,
    Verification,
    clock_anchor,
    clock_moved_back,
    effective_terms,
    expiry_warning,
    in_window,
    is_aware,
    newest_seen,
    span_words,
    verdict_refusal,
    verified_terms,
)
from nodeau.domain.plans import HOME, PRO, PROTECTIONS, Feature, PlanName, PlanTerms

START = datetime(2025, 1, 1, tzinfo=UTC)
END = datetime(2026, 1, 1, tzinfo=UTC)
INSIDE = datetime(2025, 6, 1, tzinfo=UTC)
HERE = "inst-here"
GRACE_END = END + TIMING.grace
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
        "clock-moved-back",
    ]


def test_an_entitlement_good_until_the_last_day_a_date_can_name_is_accepted() -> None:
    forever = pro(not_after=datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
    status = effective_terms(forever, SignatureVerdict.VALID, HERE, INSIDE)
    assert (status.terms, status.reason) == (PRO, EntitlementReason.ACCEPTED)
    assert "entitled until 9999-12-31T23:59:00+00:00" in status.sentence
    late = datetime(9999, 12, 31, 23, 59, 30, tzinfo=UTC)  # past it, inside the grace
    assert effective_terms(forever, SignatureVerdict.VALID, HERE, late).terms == PRO


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
            GRACE_END,
            EntitlementReason.EXPIRED,
            "The Pro entitlement expired at 2026-01-01T00:00:00+00:00 and its 14 days of"
            " grace ended at 2026-01-15T00:00:00+00:00",
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
        (GRACE_END - timedelta(microseconds=1), False),
        (datetime(2025, 1, 1, 5, 29, tzinfo=timezone(timedelta(hours=5, minutes=30))), False),
        (datetime(2025, 1, 1, 5, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))), True),
    ],
)
def test_window_is_half_open_and_zone_aware(now: datetime, accepted: bool) -> None:
    assert in_window(pro(), now) is accepted
    no_grace = Timing(grace=timedelta(0))
    status = effective_terms(pro(), SignatureVerdict.VALID, HERE, now, timing=no_grace)
    assert status.accepted is accepted


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
        and entitlement.not_before <= now < entitlement.not_after + TIMING.grace
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
    elif now >= matching.not_after + TIMING.grace:  # the expiry plus the grace, not grace_end
        assert (status.terms, status.reason) == (HOME, EntitlementReason.EXPIRED)
    else:
        assert (status.terms, status.reason) == (matching.terms(), EntitlementReason.ACCEPTED)


# -- grace, warning ahead, clock moved back


WARNING_THEN = (
    ": new decisions keep its terms until 2026-01-15T00:00:00+00:00 (14 days of grace),"
    " then use the free Home plan; nothing already serving is stopped."
)


@pytest.mark.parametrize(
    ("now", "warning"),
    [
        (END - TIMING.warn_ahead - timedelta(microseconds=1), None),
        (
            END - TIMING.warn_ahead,
            "The Pro entitlement expires at 2026-01-01T00:00:00+00:00" + WARNING_THEN,
        ),
        (
            END - timedelta(microseconds=1),
            "The Pro entitlement expires at 2026-01-01T00:00:00+00:00" + WARNING_THEN,
        ),
        (END, "The Pro entitlement expired at 2026-01-01T00:00:00+00:00" + WARNING_THEN),
        (
            GRACE_END - timedelta(microseconds=1),
            "The Pro entitlement expired at 2026-01-01T00:00:00+00:00" + WARNING_THEN,
        ),
    ],
)
def test_expiry_warns_ahead_and_keeps_the_terms_through_the_grace(
    now: datetime, warning: str | None
) -> None:
    status = effective_terms(pro(), SignatureVerdict.VALID, HERE, now)
    assert (status.terms, status.reason, status.warning) == (
        PRO,
        EntitlementReason.ACCEPTED,
        warning,
    )


def test_after_the_grace_it_is_home_without_a_warning() -> None:
    status = effective_terms(pro(), SignatureVerdict.VALID, HERE, GRACE_END)
    assert (status.terms, status.reason, status.warning) == (HOME, EntitlementReason.EXPIRED, None)


CLOCK_BACK = (
    "The clock reads 2025-05-30T23:59:59+00:00, more than 24 hours before"
    " 2025-06-01T00:00:00+00:00, a moment this installation has already seen: the clock was"
    " moved back, so the Pro entitlement's dates cannot be checked"
)


@pytest.mark.parametrize(
    ("anchor", "issued", "now", "moved_back"),
    [
        (None, None, INSIDE, False),
        (INSIDE, None, INSIDE, False),
        (INSIDE, None, INSIDE - timedelta(hours=24), False),
        (INSIDE, None, INSIDE - timedelta(hours=24, seconds=1), True),
        (None, INSIDE, INSIDE - timedelta(hours=24, seconds=1), True),
        (START, INSIDE, INSIDE - timedelta(hours=24, seconds=1), True),
        (INSIDE, START, INSIDE - timedelta(hours=24, seconds=1), True),
        (START, START, INSIDE - timedelta(hours=24, seconds=1), False),
    ],
)
def test_a_clock_moved_back_beyond_the_tolerance_means_home(
    anchor: datetime | None, issued: datetime | None, now: datetime, moved_back: bool
) -> None:
    status = effective_terms(
        pro(issued_at=issued), SignatureVerdict.VALID, HERE, now, anchor=anchor
    )
    if moved_back:
        assert status == EntitlementStatus.home(
            EntitlementReason.CLOCK_MOVED_BACK,
            CLOCK_BACK.replace("2025-05-30T23:59:59", now.isoformat()[:19]),
        )
    else:
        assert status.reason is EntitlementReason.ACCEPTED


def test_a_clock_moved_back_is_said_before_the_window_is_looked_at() -> None:
    # moved back to before not_before: "moved back", not "not yet valid"
    status = effective_terms(
        pro(), SignatureVerdict.VALID, HERE, START - timedelta(days=2), anchor=INSIDE
    )
    assert status.reason is EntitlementReason.CLOCK_MOVED_BACK


def test_the_clock_is_not_consulted_for_a_document_that_says_nothing_trustworthy() -> None:
    for verdict, reason in (
        (SignatureVerdict.BAD_SIGNATURE, EntitlementReason.BAD_SIGNATURE),
        (SignatureVerdict.MALFORMED, EntitlementReason.MALFORMED),
    ):
        status = effective_terms(pro(), verdict, HERE, START, anchor=END)
        assert status.reason is reason
    assert effective_terms(None, None, HERE, START, anchor=END).reason is (
        EntitlementReason.NONE_PRESENT
    )


@given(st.none() | aware_times, aware_times)
def test_the_anchor_only_moves_forward(anchor: datetime | None, now: datetime) -> None:
    after = newest_seen(anchor, now)
    assert after >= now
    assert anchor is None or after >= anchor
    assert after in (anchor, now)
    assert not clock_moved_back(now, after, timedelta(0)) or after == anchor


def test_the_clock_anchor_is_the_later_of_stored_and_issued() -> None:
    assert clock_anchor(None, None) is None
    assert clock_anchor(START, None) == START
    assert clock_anchor(None, pro(issued_at=INSIDE)) == INSIDE
    assert clock_anchor(END, pro(issued_at=INSIDE)) == END
    assert clock_anchor(START, pro(issued_at=INSIDE)) == INSIDE


@pytest.mark.parametrize(
    ("span", "words"),
    [
        (timedelta(days=14), "14 days"),
        (timedelta(days=2), "2 days"),
        (timedelta(hours=24), "24 hours"),
        (timedelta(hours=1), "1 hour"),
        (timedelta(hours=36), "36 hours"),
        (timedelta(minutes=90), "90 minutes"),
        (timedelta(seconds=5), "5 seconds"),
    ],
)
def test_span_words(span: timedelta, words: str) -> None:
    assert span_words(span) == words


@pytest.mark.parametrize("which", ["grace", "warn_ahead", "clock_tolerance"])
def test_timing_cannot_be_negative(which: str) -> None:
    with pytest.raises(
        ValueError, match=r"^grace, warning and clock tolerance cannot be negative$"
    ):
        Timing(**{which: timedelta(seconds=-1)})


def test_a_verification_carries_an_entitlement_exactly_when_valid() -> None:
    message = r"^an entitlement is carried exactly when its signature is valid$"
    with pytest.raises(ValueError, match=message):
        Verification(verdict=SignatureVerdict.VALID)
    with pytest.raises(ValueError, match=message):
        Verification(verdict=SignatureVerdict.BAD_SIGNATURE, entitlement=pro())


def test_verified_terms_names_the_unknown_key_from_the_document() -> None:
    unknown = Verification(verdict=SignatureVerdict.UNKNOWN_KEY, key_id="key-9")
    status = verified_terms(unknown, HERE, INSIDE)
    assert status.cause == "The entitlement is signed by key key-9, which this build does not know"
    assert verified_terms(None, HERE, INSIDE).reason is EntitlementReason.NONE_PRESENT
    valid = Verification(verdict=SignatureVerdict.VALID, key_id="key-2025", entitlement=pro())
    accepted = verified_terms(valid, HERE, INSIDE)
    assert accepted.terms == PRO
    assert accepted.cause == accepted.sentence


VALID = Verification(verdict=SignatureVerdict.VALID, key_id="key-2025", entitlement=pro())
SHORT = Timing(grace=timedelta(days=1))


def test_a_verified_document_is_refused_when_the_clock_reads_before_the_anchor_given() -> None:
    assert verified_terms(VALID, HERE, INSIDE).reason is EntitlementReason.ACCEPTED
    later = INSIDE + timedelta(days=3)
    found = verified_terms(VALID, HERE, INSIDE, anchor=later)
    assert found.reason is EntitlementReason.CLOCK_MOVED_BACK


def test_a_verified_document_is_judged_by_the_timing_given() -> None:
    two_days_after = END + timedelta(days=2)
    assert verified_terms(VALID, HERE, two_days_after).accepted  # inside the 14 days of grace
    found = verified_terms(VALID, HERE, two_days_after, timing=SHORT)
    assert found.reason is EntitlementReason.EXPIRED
    assert found.sentence == (
        "The Pro entitlement expired at 2026-01-01T00:00:00+00:00 and its 24 hours of grace "
        "ended at 2026-01-02T00:00:00+00:00; running on the free Home plan."
    )


def test_a_document_whose_signature_was_not_checked_is_said_so() -> None:
    found = effective_terms(pro(), None, HERE, INSIDE)
    assert (found.reason, found.sentence) == (
        EntitlementReason.NOT_VERIFIED,
        "The entitlement's signature has not been checked; running on the free Home plan.",
    )


def test_the_warning_names_the_end_of_the_grace_in_force() -> None:
    warning = expiry_warning(pro(), END, SHORT)
    assert warning == (
        "The Pro entitlement expired at 2026-01-01T00:00:00+00:00: new decisions keep its "
        "terms until 2026-01-02T00:00:00+00:00 (24 hours of grace), then use the free Home "
        "plan; nothing already serving is stopped."
    )
