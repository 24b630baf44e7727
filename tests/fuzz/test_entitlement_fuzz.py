"""Fuzzing entitlement documents: every change to a valid one is refused, with its reason.

Every byte flipped, every truncation, the malformed cases of docs/entitlement-format.md, then
Hypothesis (derandomized) edits: ``verify`` never raises, the refusal has its reason and detail,
and ``nodeau plan`` over a store holding the document shows the Home plan.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodeau.adapters.entitlement_document import (
    MAX_BYTES,
    Ed25519EntitlementVerifier,
    envelope_bytes,
)
from nodeau.apps.plans.entitlement import plan_in_force
from nodeau.domain.entitlements import EntitlementReason, SignatureVerdict, verified_terms
from nodeau.domain.plans import HOME
from nodeau.ports.entitlements import StoredEntitlement
from tests.support.builders.entitlements import (
    KEY_ID,
    NEXT_KEY_ID,
    NOW,
    document,
    signing_key,
    trusted,
)

pytestmark = pytest.mark.slow

HERE = "inst-here"
VERIFIER = Ed25519EntitlementVerifier(trusted(KEY_ID, NEXT_KEY_ID))
VALID = document(HERE)
REFUSALS = {
    SignatureVerdict.MALFORMED: EntitlementReason.MALFORMED,
    SignatureVerdict.UNKNOWN_KEY: EntitlementReason.UNKNOWN_KEY,
    SignatureVerdict.BAD_SIGNATURE: EntitlementReason.BAD_SIGNATURE,
}


class HeldDocument:
    """An ``EntitlementStore`` holding one document, in memory."""

    def __init__(self, doc: bytes) -> None:
        self.doc = doc

    def read(self) -> StoredEntitlement:
        return StoredEntitlement(installation_id=HERE, document=self.doc, anchor=None, where="m")

    def install(self, document: bytes, seen: datetime) -> None:
        raise AssertionError("the fuzz installs nothing")

    def remove(self, seen: datetime) -> bool:
        raise AssertionError("the fuzz removes nothing")

    def advance_anchor(self, seen: datetime) -> None:
        pass


def refused(doc: bytes) -> EntitlementReason:
    """The property; the reason it was refused for."""
    found = VERIFIER.verify(doc)
    assert found.verdict is not SignatureVerdict.VALID, doc
    assert found.detail, (doc, found)
    status = verified_terms(found, HERE, NOW)
    assert status.terms == HOME and not status.accepted
    assert status.reason is REFUSALS[found.verdict]
    assert status.sentence.endswith("; running on the free Home plan.")
    view = plan_in_force("fuzz", HeldDocument(doc), VERIFIER, NOW)
    assert (view.plan, view.accepted, view.reason) == ("home", False, status.reason.value)
    return status.reason


def test_the_valid_document_is_accepted() -> None:
    view = plan_in_force("fuzz", HeldDocument(VALID), VERIFIER, NOW)
    assert (view.plan, view.reason) == ("pro", "accepted")
    assert len(VALID) > 300


def test_every_bit_and_byte_flipped_in_turn_is_refused() -> None:
    reasons: set[EntitlementReason] = set()
    checked = 0
    for at in range(len(VALID)):
        for mask in (1, 2, 4, 8, 16, 32, 64, 128, 0xFF):
            flipped = bytearray(VALID)
            flipped[at] ^= mask
            reasons.add(refused(bytes(flipped)))
            checked += 1
    assert checked == 9 * len(VALID)
    assert reasons == set(REFUSALS.values())  # each kind of refusal was met


def test_every_truncation_is_refused() -> None:
    for length in range(len(VALID)):
        assert refused(VALID[:length]) is EntitlementReason.MALFORMED


def envelope(**changes: object) -> bytes:
    raw = json.loads(VALID)
    raw.update(changes)
    return json.dumps({k: v for k, v in raw.items() if v is not None}).encode()


def signed(payload: bytes) -> bytes:
    return envelope_bytes(KEY_ID, payload, signing_key(KEY_ID).sign(payload))


PAYLOAD = json.loads(base64.b64decode(json.loads(VALID)["payload"]))

# the malformed cases docs/entitlement-format.md lists, in its order
DOCUMENTED = {
    "empty": b"",
    "whitespace only": b"  \n",
    "not UTF-8": b"\xff" + VALID,
    "not JSON": b"entitlement",
    "not an object": b'["format", 1]',
    "a duplicate key": VALID[:-1] + b',"format":1}',
    "NaN": envelope(format=float("nan")),
    "too large": VALID + b" " * MAX_BYTES,
    "nested deeply": b"[" * 50_000 + b"]" * 50_000,
    "format missing": envelope(format=None),
    "format 2": envelope(format=2),
    "format as text": envelope(format="1"),
    "format as true": envelope(format=True),
    "key_id missing": envelope(key_id=None),
    "key_id empty": envelope(key_id=""),
    "key_id not text": envelope(key_id=7),
    "key_id unknown": envelope(key_id="nodeau-2099"),
    "an unknown key": envelope(comment="hi"),
    "payload missing": envelope(payload=None),
    "payload not base64": envelope(payload="%%%"),
    "payload base64 without padding": envelope(payload=json.loads(VALID)["payload"].rstrip("=")),
    "payload changed": envelope(payload=base64.b64encode(b'{"plan":"enterprise"}').decode()),
    "signature missing": envelope(signature=None),
    "signature short": envelope(signature=base64.b64encode(b"x" * 63).decode()),
    "signature of zeros": envelope(signature=base64.b64encode(bytes(64)).decode()),
    "signature of another document": envelope(signature=json.loads(document("x"))["signature"]),
    "signed payload not JSON": signed(b"pro forever"),
    "signed payload not an object": signed(b"[]"),
    "signed payload with an unknown key": signed(json.dumps({**PAYLOAD, "x": 1}).encode()),
    "signed payload without installation": signed(
        json.dumps({k: v for k, v in PAYLOAD.items() if k != "installation_id"}).encode()
    ),
    "signed payload with a naive moment": signed(
        json.dumps({**PAYLOAD, "not_after": "2030-01-01T00:00:00"}).encode()
    ),
    "signed payload with an unknown plan": signed(json.dumps({**PAYLOAD, "plan": "x"}).encode()),
    "signed payload with a zero bound": signed(json.dumps({**PAYLOAD, "max_gpus": 0}).encode()),
}


@pytest.mark.parametrize("case", sorted(DOCUMENTED))
def test_each_documented_malformed_case_is_refused(case: str) -> None:
    refused(DOCUMENTED[case])


edits = st.lists(
    st.tuples(
        st.sampled_from(["replace", "insert", "delete"]),
        st.integers(min_value=0),
        st.binary(min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


@settings(derandomize=True, max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(edits)
@example([("insert", 1, b"\t")])  # spacing inside the envelope: the same document
def test_random_edits_are_refused(changes: list[tuple[str, int, bytes]]) -> None:
    data = bytearray(VALID)
    for kind, where, chunk in changes:
        at = where % (len(data) + 1)
        if kind == "replace":
            data[at : at + len(chunk)] = chunk
        elif kind == "insert":
            data[at:at] = chunk
        else:
            del data[at : at + len(chunk)]
    if same_envelope(bytes(data)):  # an edit that changed nothing, or only the spacing
        assert VERIFIER.verify(bytes(data)).verdict is SignatureVerdict.VALID
        return
    refused(bytes(data))


def same_envelope(doc: bytes) -> bool:
    """Whether ``doc`` is the valid envelope's JSON, differing only in insignificant spacing."""
    try:
        pairs = json.loads(doc, object_pairs_hook=list)
    except ValueError:
        return False
    return bool(pairs == json.loads(VALID, object_pairs_hook=list))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(derandomize=True, max_examples=800)
@given(
    st.dictionaries(
        st.sampled_from(["format", "key_id", "payload", "signature", "extra"]), json_values
    )
)
def test_random_envelopes_are_refused(raw: dict[str, object]) -> None:
    refused(json.dumps(raw).encode())
