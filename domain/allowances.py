"""What admission adds on top of a model's own memory terms: the runtime and a margin.

Why it is so: docs/adr/decisions/domain.md (allowances.py).
"""

from __future__ import annotations

from attrs import field, frozen

from nodeau.domain.checks import not_negative
from nodeau.domain.units import MIB


@frozen(kw_only=True)
class Allowances:
    """What is added on top of the model's own terms: the runtime and a safety margin."""

    # a card's CUDA context, libraries and loaded kernels: 610-831 MiB measured on an H200
    runtime_footprint_bytes: int = field(validator=not_negative, default=1024 * MIB)
    margin_percent: int = field(validator=not_negative, default=10)
    margin_floor_bytes: int = field(validator=not_negative, default=256 * MIB)
