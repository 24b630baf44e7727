"""The public keys this build trusts to sign entitlements, compiled into the package.

Decisions recorded here (docs/adr/0011-entitlements.md):

* Only these keys verify an entitlement in an installed Nodeau. Nothing else adds one:
  no environment variable, no file, no option. Tests pass their own keys through the
  composition root (``nodeau.apps.cli.bootstrap.plane(trusted_keys=...)``), the same
  parameter that passes these.
* More than one key may be listed, each under the id a document names, so the vendor can
  rotate: a new key is added here before documents signed by it are issued, and an old
  one stays until every document it signed has expired and its grace ended.
* Each value is the raw 32-byte Ed25519 public key. The matching private keys are held
  offline by the vendor and were never part of this repository.
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
