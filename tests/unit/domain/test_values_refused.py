"""Values refused in these words: a card without a UUID, a machine without a name, a
prediction without a term (domain/hardware.py, domain/memory.py)."""

from __future__ import annotations

import pytest

from nodeau.domain.hardware import Gpu, Machine
from nodeau.domain.memory import Source, check_single_source


def test_a_card_without_a_uuid_is_refused_in_these_words() -> None:
    with pytest.raises(ValueError, match=r"^a GPU needs a UUID$"):
        Gpu(uuid=" ", model="NVIDIA L4", total_bytes=1)


def test_a_machine_without_a_name_is_refused_in_these_words() -> None:
    with pytest.raises(ValueError, match=r"^a machine needs a name$"):
        Machine(name="  ")


def test_a_prediction_without_a_term_is_refused_in_these_words() -> None:
    with pytest.raises(ValueError, match=r"^a prediction needs at least one term$"):
        check_single_source((), Source.ESTIMATED)
