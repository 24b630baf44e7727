"""A refusal's code belongs to its kind: a mismatch is a programming error that names both."""

from __future__ import annotations

import pytest

from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind


def test_a_code_of_another_kind_is_refused_naming_the_code_and_the_kind() -> None:
    with pytest.raises(ValueError) as raised:
        Refusal(kind=RefusalKind.LIMIT, code=ReasonCode.NO_FREE_CARD, sentence="no card")
    assert str(raised.value) == "reason code capacity.no-free-card is not a limit code"
