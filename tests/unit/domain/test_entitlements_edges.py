"""What an installed document's verification gives (domain/entitlements.py): the anchor and
the timing given are the ones counted, a document whose signature was not checked is said
so, and the grace's end is named from the timing in force, in the expiry sentence and in
the warning."""

from __future__ import annotations

from datetime import timedelta

from nodeau.domain.entitlements import (
    EntitlementReason,
    SignatureVerdict,
    Timing,
    Verification,
    effective_terms,
    expiry_warning,
    verified_terms,
)
from tests.unit.domain.test_entitlements import END, HERE, INSIDE, pro

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
