"""The structured-output challenge names three different keys, each a name, whatever the
draws: the schema requires them, the prompt asks for two of them."""

from __future__ import annotations

import random

import pytest

from nodeau.domain.probes.structured import structured_challenge
from tests.support.builders.draws import RepeatingDraws


@pytest.mark.parametrize("seed", range(20))
def test_the_schema_requires_three_different_named_keys_and_the_prompt_asks_for_two(
    seed: int,
) -> None:
    challenge = structured_challenge(random.Random(seed), "m")
    schema = challenge.requests[0].body["response_format"]["json_schema"]["schema"]
    required = schema["required"]
    assert all(isinstance(key, str) and key for key in required)
    assert len(set(required)) == 3
    assert set(schema["properties"]) == set(required)
    prompt = challenge.requests[0].body["messages"][0]["content"]
    word_key, number_key, _fixed = required
    assert f'"{word_key}" set to' in prompt and f'"{number_key}" set to' in prompt


@pytest.mark.parametrize("repeats", [2, 3])
def test_a_key_drawn_again_after_a_collision_is_a_key_name(repeats: int) -> None:
    challenge = structured_challenge(RepeatingDraws(repeats), "m")
    required = challenge.requests[0].body["response_format"]["json_schema"]["schema"]["required"]
    assert all(isinstance(key, str) and key.startswith("key_") for key in required)
    assert len(set(required)) == 3
