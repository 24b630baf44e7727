"""The public keys this build trusts to sign entitlements, compiled into the package.

Why it is so: docs/adr/decisions/adapters.md (entitlement_keys.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

PRODUCTION_KEYS: Mapping[str, bytes] = MappingProxyType(
    {
        "nodeau-2025-1": bytes.fromhex(
            "03a0719151282bbefa09494a6f98f5f1b84b0db5a1ce4bbe1fccaa785433e695"
        ),
    }
)
