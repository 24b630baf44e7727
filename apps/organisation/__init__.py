"""``nodeau organisation``: the organisation's policy and who asks (ADR 0030)."""
