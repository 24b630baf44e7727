"""Entitlements for tests: keys generated per run, documents signed by them.

A test trusts its keys by passing them where the composition root passes the compiled-in
ones (``bootstrap.plane(trusted_keys=...)``, ``Ed25519EntitlementVerifier(...)``); no
file or environment variable can.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache

from attrs import evolve
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from nodeau.adapters.entitlement_document import signed_document
from nodeau.domain.entitlements import Entitlement
from nodeau.domain.plans import PlanName

KEY_ID = "test-2025-a"
NEXT_KEY_ID = "test-2026-b"
ISSUED = datetime(2025, 1, 1, tzinfo=UTC)
NOW = datetime(2025, 6, 1, tzinfo=UTC)


@cache
def signing_key(key_id: str) -> Ed25519PrivateKey:
    """A key made for this test run, one per id."""
    del key_id  # only the cache's key
    return Ed25519PrivateKey.generate()


def public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def trusted(*key_ids: str) -> dict[str, bytes]:
    """The public keys of ``key_ids`` (default: ``KEY_ID``), as a verifier takes them."""
    return {k: public_bytes(signing_key(k)) for k in key_ids or (KEY_ID,)}


def entitlement(installation_id: str, **changes: object) -> Entitlement:
    """A Pro entitlement for ``installation_id``, valid for 2025, issued by ``KEY_ID``."""
    base = Entitlement(
        installation_id=installation_id,
        plan=PlanName.PRO,
        not_before=ISSUED,
        not_after=ISSUED + timedelta(days=365),
        issued_at=ISSUED,
        issuer_key_id=KEY_ID,
    )
    return evolve(base, **changes)  # type: ignore[arg-type]


def document(installation_id: str, key_id: str | None = None, **changes: object) -> bytes:
    """A signed document of ``entitlement(installation_id, **changes)``, signed by the key
    of its issuer id (or by ``key_id``'s key while still naming the issuer)."""
    e = entitlement(installation_id, **changes)
    return signed_document(e, signing_key(key_id or e.issuer_key_id))
