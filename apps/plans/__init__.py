"""``nodeau plan``: the entitlement in force, installing one, removing it (ADR 0030)."""
