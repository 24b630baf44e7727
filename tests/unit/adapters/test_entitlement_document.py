"""Verifying signed entitlement documents offline, with keys the test generates: the
verdict, the detail a person reads, and the plan that follows."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest

from nodeau.adapters.entitlement_document import (
    MAX_BYTES,
    Ed25519EntitlementVerifier,
    compiled_in_verifier,
    envelope_bytes,
    payload_bytes,
)
from nodeau.adapters.entitlement_keys import PRODUCTION_KEYS
from nodeau.domain.entitlements import (
    TIMING,
    EntitlementReason,
    SignatureVerdict,
    Verification,
    verified_terms,
)
from nodeau.domain.plans import HOME, PRO, Feature, PlanName
from tests.support.builders.entitlements import (
    ISSUED,
    KEY_ID,
    NEXT_KEY_ID,
    NOW,
    document,
    entitlement,
    signing_key,
    trusted,
)

HERE = "inst-here"


def verify(doc: bytes, *key_ids: str) -> Verification:
    return Ed25519EntitlementVerifier(trusted(*key_ids)).verify(doc)


def envelope(doc: bytes) -> dict[str, object]:
    raw = json.loads(doc)
    assert isinstance(raw, dict)
    return raw


def with_envelope(doc: bytes, **changes: object) -> bytes:
    return json.dumps({**envelope(doc), **changes}).encode()


def signed_payload(payload: bytes, key_id: str = KEY_ID) -> bytes:
    return envelope_bytes(key_id, payload, signing_key(key_id).sign(payload))


def test_a_good_document_verifies_and_gives_its_plan() -> None:
    found = verify(document(HERE, features_added=frozenset({Feature.SSO}), max_gpus=99))
    assert found == Verification(
        verdict=SignatureVerdict.VALID,
        key_id=KEY_ID,
        entitlement=entitlement(HERE, features_added=frozenset({Feature.SSO}), max_gpus=99),
    )
    status = verified_terms(found, HERE, NOW)
    assert status.reason is EntitlementReason.ACCEPTED
    assert status.terms.features == PRO.features | {Feature.SSO}
    assert (status.terms.max_machines, status.terms.max_gpus) == (PRO.max_machines, 99)


def test_rotation_either_trusted_key_verifies() -> None:
    old = document(HERE)
    new = document(HERE, issuer_key_id=NEXT_KEY_ID)
    for doc, key_id in ((old, KEY_ID), (new, NEXT_KEY_ID)):
        found = verify(doc, KEY_ID, NEXT_KEY_ID)
        assert (found.verdict, found.key_id) == (SignatureVerdict.VALID, key_id)
    # a build that dropped the old key no longer trusts what it signed
    assert verify(old, NEXT_KEY_ID).verdict is SignatureVerdict.UNKNOWN_KEY


def test_an_unknown_key_is_named() -> None:
    found = verify(document(HERE, issuer_key_id="someone-else"))
    assert found == Verification(
        verdict=SignatureVerdict.UNKNOWN_KEY,
        key_id="someone-else",
        detail=f"this build trusts {KEY_ID}",
    )
    status = verified_terms(found, HERE, NOW)
    assert (status.terms, status.reason) == (HOME, EntitlementReason.UNKNOWN_KEY)
    assert status.sentence == (
        "The entitlement is signed by key someone-else, which this build does not know;"
        " running on the free Home plan."
    )


def test_a_document_signed_by_another_key_under_a_trusted_id_is_a_bad_signature() -> None:
    forged = document(HERE, key_id="forger")  # names KEY_ID, signed by another key
    found = verify(forged)
    assert found.verdict is SignatureVerdict.BAD_SIGNATURE
    assert found.detail == f"the payload was not signed by key {KEY_ID}, or was changed"
    assert verified_terms(found, HERE, NOW).reason is EntitlementReason.BAD_SIGNATURE


def test_a_changed_payload_is_a_bad_signature() -> None:
    doc = document(HERE)
    payload = base64.b64decode(str(envelope(doc)["payload"]))
    changed = payload.replace(b'"pro"', b'"enterprise"')
    found = verify(with_envelope(doc, payload=base64.b64encode(changed).decode()))
    assert found.verdict is SignatureVerdict.BAD_SIGNATURE
    assert verified_terms(found, HERE, NOW).terms == HOME


@pytest.mark.parametrize(
    ("now", "installation", "reason"),
    [
        (NOW, HERE, EntitlementReason.ACCEPTED),
        (ISSUED - timedelta(seconds=1), HERE, EntitlementReason.NOT_YET_VALID),
        (ISSUED + timedelta(days=365) + TIMING.grace, HERE, EntitlementReason.EXPIRED),
        (NOW, "inst-elsewhere", EntitlementReason.OTHER_INSTALLATION),
    ],
)
def test_dates_and_installation_decide_after_the_signature(
    now: object, installation: str, reason: EntitlementReason
) -> None:
    found = verify(document(HERE, issued_at=ISSUED - timedelta(days=1)))
    status = verified_terms(found, installation, now)  # type: ignore[arg-type]
    assert status.reason is reason
    assert (status.terms == HOME) is (reason is not EntitlementReason.ACCEPTED)


def test_a_clock_moved_back_before_the_stored_anchor_is_home() -> None:
    found = verify(document(HERE))
    status = verified_terms(found, HERE, NOW - timedelta(days=2), anchor=NOW)
    assert (status.terms, status.reason) == (HOME, EntitlementReason.CLOCK_MOVED_BACK)
    status = verified_terms(found, HERE, NOW - timedelta(hours=23), anchor=NOW)
    assert status.reason is EntitlementReason.ACCEPTED


def test_a_clock_before_the_document_was_issued_is_moved_back() -> None:
    found = verify(document(HERE, issued_at=NOW))
    status = verified_terms(found, HERE, NOW - timedelta(days=2))
    assert status.reason is EntitlementReason.CLOCK_MOVED_BACK


GOOD_PAYLOAD = {
    "installation_id": HERE,
    "plan": "pro",
    "not_before": "2025-01-01T00:00:00+00:00",
    "not_after": "2026-01-01T00:00:00+00:00",
    "issued_at": "2025-01-01T00:00:00+00:00",
}


@pytest.mark.parametrize(
    ("doc", "detail"),
    [
        (b"", "the document is not JSON"),
        (b"\xff\xfe", "the document is not UTF-8 text"),
        (b"[]", "the document is not a JSON object"),
        (b'{"format": 1, "format": 1}', "the document: key 'format' appears twice in one object"),
        (b'{"format": NaN}', "the document: NaN is not a JSON number"),
        (b"{}", "the document.format: missing"),
        (b"[" * 100_000, f"the document is larger than {MAX_BYTES} bytes"),
        (b"[" * 60_000, "the document is not JSON"),
    ],
)
def test_unreadable_documents_say_why(doc: bytes, detail: str) -> None:
    found = verify(doc)
    assert found == Verification(verdict=SignatureVerdict.MALFORMED, detail=detail)
    status = verified_terms(found, HERE, NOW)
    assert (status.terms, status.reason) == (HOME, EntitlementReason.MALFORMED)
    assert status.sentence == "The entitlement could not be read; running on the free Home plan."


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"format": 2}, "the document.format: this Nodeau reads entitlement format 1, not 2"),
        ({"format": True}, "the document.format: expected a whole number, got true/false"),
        ({"extra": 1}, "the document: unknown key 'extra'"),
        ({"key_id": ""}, "the document.key_id: expected printable text without surrounding"),
        ({"payload": "not base64!"}, "the document.payload: not base64"),
        ({"payload": "e30"}, "the document.payload: not base64"),
        ({"signature": "AA=="}, "the document.signature: not a 64-byte signature"),
    ],
)
def test_malformed_envelopes_say_where(changes: dict[str, object], detail: str) -> None:
    found = verify(with_envelope(document(HERE), **changes))
    assert found.verdict is SignatureVerdict.MALFORMED
    assert found.detail is not None and found.detail.startswith(detail)


def test_base64_must_be_canonical() -> None:
    doc = document(HERE)
    text = str(envelope(doc)["signature"])
    last = text[-3]  # 64 bytes: the last data character carries 4 unused bits
    other = next(c for c in "ABCDEFGHIJKLMNOP" if c != last)
    loose = text[:-3] + other + text[-2:]
    assert base64.b64decode(loose)[:-1] == base64.b64decode(text)[:-1]
    found = verify(with_envelope(doc, signature=loose))
    assert found.verdict in (SignatureVerdict.MALFORMED, SignatureVerdict.BAD_SIGNATURE)


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        ({**GOOD_PAYLOAD, "plan": "gold"}, "the payload.plan: 'gold' is not one of home, pro"),
        ({**GOOD_PAYLOAD, "max_gpus": 0}, "the payload.max_gpus: must be above zero, got 0"),
        ({**GOOD_PAYLOAD, "max_gpus": "8"}, "the payload.max_gpus: expected a whole number"),
        ({**GOOD_PAYLOAD, "not_after": "2026-01-01"}, "the payload.not_after: '2026-01-01' has"),
        ({**GOOD_PAYLOAD, "features_added": ["fleet"]}, "the payload.features_added[0]: 'fleet'"),
        ({**GOOD_PAYLOAD, "signed_by": "x"}, "the payload: unknown key 'signed_by'"),
        ({k: v for k, v in GOOD_PAYLOAD.items() if k != "issued_at"}, "the payload.issued_at"),
    ],
)
def test_a_signed_payload_that_does_not_read_is_malformed(
    payload: dict[str, object], detail: str
) -> None:
    found = verify(signed_payload(json.dumps(payload).encode()))
    assert found.verdict is SignatureVerdict.MALFORMED
    assert found.key_id == KEY_ID
    assert found.detail is not None and found.detail.startswith(detail), found.detail


def test_the_good_payload_itself_reads() -> None:
    found = verify(signed_payload(json.dumps(GOOD_PAYLOAD).encode()))
    assert found.verdict is SignatureVerdict.VALID
    assert found.entitlement is not None and found.entitlement.plan is PlanName.PRO


def test_the_payload_is_canonical_json() -> None:
    payload = payload_bytes(entitlement(HERE, max_machines=3))
    assert (
        payload == json.dumps(json.loads(payload), sort_keys=True, separators=(",", ":")).encode()
    )
    assert b'"max_gpus"' not in payload and b'"max_machines":3' in payload


def test_the_compiled_in_keys_are_the_only_ones_an_installed_build_trusts() -> None:
    verifier = compiled_in_verifier()
    assert verifier.key_ids == tuple(sorted(PRODUCTION_KEYS))
    assert all(len(k) == 32 for k in PRODUCTION_KEYS.values())
    assert verifier.verify(document(HERE)).verdict is SignatureVerdict.UNKNOWN_KEY


def test_a_trusted_key_must_be_an_ed25519_public_key() -> None:
    with pytest.raises(ValueError, match=r"^trusted key k is not a 32-byte Ed25519 public key$"):
        Ed25519EntitlementVerifier({"k": b"short"})
