"""Fuzzing the GGUF inspector: 7,500 mutated, overwritten or random files, each a possible
summary or a failure of a known cause (the property: tests/support/builders/gguf_outcomes.py); no
crash, no hang. tests/fuzz/test_gguf_damage.py runs damage whose failure is known.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.builders.gguf_outcomes import FUZZ, SHARES, Seed, outcome, run_property

pytestmark = pytest.mark.slow

INTERESTING = (0, 1, 2, 0x7F, 0xFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1)


def flip(data: bytearray, at: int, xor: int) -> None:
    if data:
        data[at % len(data)] ^= xor


def truncate(data: bytearray, at: int) -> None:
    del data[at % (len(data) + 1) :]


def insert(data: bytearray, at: int, chunk: bytes) -> None:
    position = at % (len(data) + 1)
    data[position:position] = chunk


def delete(data: bytearray, at: int, span: int) -> None:
    position = at % (len(data) + 1)
    del data[position : position + span]


def overwrite(data: bytearray, at: int, value: int, width: int) -> None:
    position = at % (len(data) + 1)
    packed = struct.pack("<Q", value % 2**64)[:width]
    data[position : position + width] = packed


def mutations(region: int) -> st.SearchStrategy[Callable[[bytearray], None]]:
    """One random edit; ``region`` biases positions towards the metadata, where parsing happens."""
    # Wide integers taken modulo a length: Hypothesis favours small ones, which would
    # spend most cases on the magic. Past the magic in the metadata, or anywhere.
    position = st.one_of(
        st.integers(0, 2**32).map(lambda n: 4 + n % max(region - 4, 1)), st.integers(0, 2**32)
    )
    value = st.one_of(st.sampled_from(INTERESTING), st.integers(0, 2**64 - 1))
    return st.one_of(
        st.builds(lambda at, xor: lambda d: flip(d, at, xor), position, st.integers(1, 255)),
        st.builds(lambda at: lambda d: truncate(d, at), position),
        st.builds(
            lambda at, c: lambda d: insert(d, at, c), position, st.binary(min_size=1, max_size=16)
        ),
        st.builds(lambda at, n: lambda d: delete(d, at, n), position, st.integers(1, 64)),
        st.builds(
            lambda at, v, w: lambda d: overwrite(d, at, v, w),
            position,
            value,
            st.sampled_from((1, 2, 4, 8)),
        ),
    )


# A random prefix, on one case in eight: any prefix spoils the magic, so more would be wasted.
prefixes = st.tuples(st.integers(0, 2**16), st.binary(min_size=1, max_size=32)).map(
    lambda t: t[1] if t[0] % 8 == 3 else b""  # not 0: Hypothesis favours the bounds
)


def test_mutated_models(seeds: tuple[Seed, ...], tmp_path: Path) -> None:
    path, executed = tmp_path / "fuzz.gguf", []
    # One strategy per seed, built once: building one per example costs more than inspecting.
    cases = st.one_of(
        [
            st.tuples(
                st.just(seed),
                st.lists(mutations(seed.metadata_end), min_size=1, max_size=4),
                prefixes,
            )
            for seed in seeds
        ]
    )

    @settings(FUZZ, max_examples=SHARES["mutations"])
    @given(cases)
    def mutated(case: tuple[Seed, list[Callable[[bytearray], None]], bytes]) -> None:
        seed, edits, prefix = case
        body = bytearray(seed.data)
        for edit in edits:
            edit(body)
        executed.append(1)
        outcome(path, prefix + bytes(body))

    run_property("mutations", mutated, executed)


def test_numbers_overwritten_with_absurd_values(seeds: tuple[Seed, ...], tmp_path: Path) -> None:
    """Every length, count and type field of the seeds, set to edge and random values."""
    path, executed = tmp_path / "fuzz.gguf", []
    value = st.one_of(st.sampled_from(INTERESTING), st.integers(0, 2**64 - 1))
    cases = st.one_of(
        [
            st.tuples(
                st.just(seed),
                st.lists(
                    st.tuples(st.sampled_from(seed.number_offsets), value, st.sampled_from((4, 8))),
                    min_size=1,
                    max_size=3,
                ),
            )
            for seed in seeds
        ]
    )

    @settings(FUZZ, max_examples=SHARES["numbers"])
    @given(cases)
    def overwritten(case: tuple[Seed, list[tuple[int, int, int]]]) -> None:
        seed, writes = case
        body = bytearray(seed.data)
        for at, number, width in writes:
            body[at : at + width] = struct.pack("<Q", number)[:width]
        executed.append(1)
        outcome(path, bytes(body))

    run_property("numbers", overwritten, executed)


def test_random_bytes(tmp_path: Path) -> None:
    """Random bytes, half of them behind a plausible GGUF header so they reach the reader."""
    path, executed = tmp_path / "fuzz.gguf", []
    header = st.builds(
        lambda version, tensors, kvs: b"GGUF" + struct.pack("<IQQ", version, tensors, kvs),
        st.sampled_from((2, 3)),
        st.integers(0, 8),
        st.integers(0, 8),
    )

    @settings(FUZZ, max_examples=SHARES["random"])
    @given(
        st.one_of(
            st.binary(max_size=512), st.builds(bytes.__add__, header, st.binary(max_size=512))
        )
    )
    def random_file(body: bytes) -> None:
        executed.append(1)
        outcome(path, body)

    run_property("random", random_file, executed)
