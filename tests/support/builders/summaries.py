"""The tiny test architecture's ``ModelSummary``, as a verified copy reports it: one value,
and ``tiny_summary`` for a test that changes only what it is about."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from nodeau.domain.model_info import ModelSummary
from tests.support.builders.architectures import TINY

SUMMARY = ModelSummary(
    architecture=TINY,
    quantisation="Q8_0",
    tensor_count=21,
    tensor_bytes=100,
    has_tokenizer=True,
    has_chat_template=True,
)


def tiny_summary(**changes: Any) -> ModelSummary:
    """``SUMMARY`` with ``changes``."""
    return evolve(SUMMARY, **changes)
