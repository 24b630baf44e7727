"""Signed entitlement documents (format 1): reading one strictly, verifying it offline, and
writing one (the vendor's side, and the tests').

Why it is so: docs/adr/decisions/adapters.md (entitlement_document.py).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NewType, TypeVar

import cattrs
from attrs import frozen
from cattrs.cols import is_sequence
from cattrs.errors import BaseValidationError
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from nodeau.adapters.strict_json import (
    FieldProblem,
    exactly,
    first_problem,
    list_of,
    no_constant,
    no_duplicate_keys,
    positive_count,
)
from nodeau.domain.entitlements import Entitlement, SignatureVerdict, Verification
from nodeau.domain.plans import Feature, PlanName

FORMAT = 1
MAX_BYTES = 64 * 1024
SIGNATURE_BYTES = 64
PUBLIC_KEY_BYTES = 32

_Format = NewType("_Format", int)
_Text = NewType("_Text", str)
_Count = NewType("_Count", int)
_Base64 = NewType("_Base64", bytes)
_Moment = NewType("_Moment", datetime)


@frozen(kw_only=True)
class _Envelope:
    format: _Format
    key_id: _Text
    payload: _Base64
    signature: _Base64


@frozen(kw_only=True)
class _Payload:
    installation_id: _Text
    plan: PlanName
    features_added: tuple[Feature, ...] = ()
    max_machines: _Count | None = None
    max_gpus: _Count | None = None
    not_before: _Moment
    not_after: _Moment
    issued_at: _Moment


_T = TypeVar("_T")


def _text(value: object, _type: object) -> _Text:
    text = exactly(str, "a string")(value, _type)
    if not text.strip() or text != text.strip() or not text.isprintable():
        raise FieldProblem("expected printable text without surrounding spaces")
    return _Text(text)


def _format(value: object, _type: object) -> _Format:
    number = exactly(int, "a whole number")(value, _type)
    if number != FORMAT:
        raise FieldProblem(f"this Nodeau reads entitlement format {FORMAT}, not {number}")
    return _Format(number)


def _base64(value: object, _type: object) -> _Base64:
    text = exactly(str, "a string")(value, _type)
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise FieldProblem("not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise FieldProblem("not base64 in its canonical form")
    return _Base64(raw)


def _moment(value: object, _type: object) -> _Moment:
    text = exactly(str, "a string")(value, _type)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise FieldProblem(f"{text!r} is not an ISO 8601 moment") from None
    if moment.utcoffset() is None:
        raise FieldProblem(f"{text!r} has no UTC offset")
    return _Moment(moment)


def _choice(kind: type[Any]) -> Callable[[object, object], Any]:
    def structure(value: object, _type: object) -> Any:
        text = exactly(str, "a string")(value, _type)
        try:
            return kind(text)
        except ValueError:
            known = ", ".join(member.value for member in kind)
            raise FieldProblem(f"{text!r} is not one of {known}") from None

    return structure


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    hooks: dict[Any, Callable[[object, object], object]] = {
        _Format: _format,
        _Text: _text,
        _Count: positive_count,
        _Base64: _base64,
        _Moment: _moment,
        PlanName: _choice(PlanName),
        Feature: _choice(Feature),
    }
    for kind, hook in hooks.items():
        converter.register_structure_hook(kind, hook)
    converter.register_structure_hook_factory(is_sequence, lambda t: list_of(t, converter))
    return converter


_CONVERTER = _converter()


def _first_problem(exc: BaseValidationError, what: str) -> str:
    found = first_problem(exc)
    if found is None:
        return f"{what}: {exc}"
    return f"{what}{'.' + found.where if found.where else ''}: {found.text}"


_S = TypeVar("_S")


def _read(data: bytes, kind: type[_S], what: str) -> _S:
    """``kind`` from JSON bytes; ``FieldProblem`` naming ``what`` and the field when it does not
    read."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FieldProblem(f"{what} is not UTF-8 text") from None
    try:
        raw = json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=no_constant)
    except FieldProblem as exc:
        raise FieldProblem(f"{what}: {exc}") from None
    except (ValueError, RecursionError):
        raise FieldProblem(f"{what} is not JSON") from None
    if type(raw) is not dict:
        raise FieldProblem(f"{what} is not a JSON object")
    try:
        return _CONVERTER.structure(raw, kind)
    except BaseValidationError as exc:
        raise FieldProblem(_first_problem(exc, what)) from None


def _malformed(detail: str, key_id: str | None = None) -> Verification:
    return Verification(verdict=SignatureVerdict.MALFORMED, key_id=key_id, detail=detail)


class Ed25519EntitlementVerifier:
    """``EntitlementVerifier`` against the Ed25519 public keys it is given, by key id."""

    def __init__(self, trusted_keys: Mapping[str, bytes]) -> None:
        keys = {}
        for key_id, raw in trusted_keys.items():
            if len(raw) != PUBLIC_KEY_BYTES:
                raise ValueError(f"trusted key {key_id} is not a 32-byte Ed25519 public key")
            keys[key_id] = Ed25519PublicKey.from_public_bytes(raw)
        self._keys = keys

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    def verify(self, document: bytes) -> Verification:
        if len(document) > MAX_BYTES:
            return _malformed(f"the document is larger than {MAX_BYTES} bytes")
        try:
            envelope = _read(document, _Envelope, "the document")
        except FieldProblem as exc:
            return _malformed(str(exc))
        key = self._keys.get(envelope.key_id)
        if key is None:
            return Verification(
                verdict=SignatureVerdict.UNKNOWN_KEY,
                key_id=envelope.key_id,
                detail=f"this build trusts {', '.join(self.key_ids) or 'no key'}",
            )
        if len(envelope.signature) != SIGNATURE_BYTES:
            return _malformed("the document.signature: not a 64-byte signature", envelope.key_id)
        try:
            key.verify(envelope.signature, envelope.payload)
        except InvalidSignature:
            return Verification(
                verdict=SignatureVerdict.BAD_SIGNATURE,
                key_id=envelope.key_id,
                detail=f"the payload was not signed by key {envelope.key_id}, or was changed",
            )
        try:
            payload = _read(envelope.payload, _Payload, "the payload")
            entitlement = Entitlement(
                installation_id=payload.installation_id,
                plan=payload.plan,
                features_added=frozenset(payload.features_added),
                max_machines=payload.max_machines,
                max_gpus=payload.max_gpus,
                not_before=payload.not_before,
                not_after=payload.not_after,
                issued_at=payload.issued_at,
                issuer_key_id=envelope.key_id,
            )
        except (FieldProblem, ValueError) as exc:
            return _malformed(str(exc), envelope.key_id)
        return Verification(
            verdict=SignatureVerdict.VALID, key_id=envelope.key_id, entitlement=entitlement
        )


def compiled_in_verifier() -> Ed25519EntitlementVerifier:
    """The verifier of an installed Nodeau: the keys compiled into the package, and no other."""
    from nodeau.adapters.entitlement_keys import PRODUCTION_KEYS

    return Ed25519EntitlementVerifier(PRODUCTION_KEYS)


# -- writing (the vendor's side)


def payload_bytes(entitlement: Entitlement) -> bytes:
    """The payload of ``entitlement``: canonical JSON (sorted keys, no spaces), UTF-8."""
    if entitlement.issued_at is None:
        raise ValueError("a document says when it was issued")
    plain: dict[str, object] = {
        "installation_id": entitlement.installation_id,
        "plan": entitlement.plan.value,
        "features_added": sorted(f.value for f in entitlement.features_added),
        "not_before": entitlement.not_before.isoformat(),
        "not_after": entitlement.not_after.isoformat(),
        "issued_at": entitlement.issued_at.isoformat(),
    }
    for name in ("max_machines", "max_gpus"):
        bound = getattr(entitlement, name)
        if bound is not None:
            plain[name] = bound
    return json.dumps(plain, sort_keys=True, separators=(",", ":")).encode("utf-8")


def envelope_bytes(key_id: str, payload: bytes, signature: bytes) -> bytes:
    """The document: the envelope as compact JSON with its keys in the documented order."""
    envelope = {
        "format": FORMAT,
        "key_id": key_id,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signature": base64.b64encode(signature).decode("ascii"),
    }
    return json.dumps(envelope, separators=(",", ":")).encode("utf-8")


def signed_document(entitlement: Entitlement, key: Ed25519PrivateKey) -> bytes:
    """A format-1 document for ``entitlement``, signed by ``key`` under its issuer key id."""
    payload = payload_bytes(entitlement)
    return envelope_bytes(entitlement.issuer_key_id, payload, key.sign(payload))
