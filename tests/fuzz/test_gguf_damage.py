"""Damage to valid GGUF files whose failure is known: each refused with the cause it must give.

A file whose tensor data alone changed is summarised as the undamaged one; every file keeps the
property of tests/support/builders/gguf_outcomes.py. Cuts are judged by the seed's layout,
overwritten fields with the ``gguf`` package's enums. Runs are derandomized.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from gguf import GGMLQuantizationType, GGUFValueType
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeau.ports.models import ModelFileCause as Cause
from tests.support.builders.gguf_outcomes import (
    FUZZ,
    SHARES,
    Outcome,
    Part,
    Seed,
    outcome,
    run_property,
)

pytestmark = pytest.mark.slow

REQUIRED = (
    "general.architecture",
    "llama.block_count",
    "llama.embedding_length",
    "llama.attention.head_count",
    "llama.context_length",
)
VALUE_TYPES = frozenset(int(t) for t in GGUFValueType)  # the format's own list
TENSOR_TYPES = frozenset(int(t) for t in GGMLQuantizationType)


def cut_outcome(seed: Seed, cut: int) -> Outcome:
    """What a file cut after ``cut`` bytes is, from where the cut falls in the seed's layout."""
    if cut == 0:
        return Cause.EMPTY
    if cut < 4:
        return Cause.BAD_MAGIC  # what is left of the magic is not "GGUF"
    if cut < 24:
        return Cause.TRUNCATED_HEADER
    if cut < seed.info_end:
        return Cause.BEYOND_FILE  # a metadata entry or tensor info runs past the end
    if cut < seed.data_end:
        return Cause.TENSOR_OUTSIDE_FILE  # the names and shapes are whole, the data is not
    return seed.summary  # only the padding after the last tensor is gone


def test_truncations(seeds: tuple[Seed, ...], tmp_path: Path) -> None:
    """Every kind of cut: in the magic, the header, the metadata, the data, the padding."""
    path, executed = tmp_path / "fuzz.gguf", []
    cases = st.one_of(
        [
            st.tuples(
                st.just(seed),
                st.one_of(
                    st.integers(0, 30),
                    st.integers(0, len(seed.data)),
                    st.sampled_from(seed.boundaries),
                ),
            )
            for seed in seeds
        ]
    )

    @settings(FUZZ, max_examples=SHARES["cuts"])
    @given(cases)
    def cut(case: tuple[Seed, int]) -> None:
        seed, at = case
        executed.append(1)
        assert outcome(path, seed.data[:at]) == cut_outcome(seed, at), at

    run_property("cuts", cut, executed)


class Damage(NamedTuple):
    what: str
    data: bytes
    expected: Outcome


def put(data: bytes, part: Part, value: int | bytes) -> bytes:
    """``data`` with the number or bytes at ``part`` replaced, little-endian, same width."""
    raw = value if isinstance(value, bytes) else (value % 2**64).to_bytes(8, "little")
    assert len(raw) >= part.width
    return data[: part.offset] + raw[: part.width] + data[part.offset + part.width :]


def damages(seed: Seed) -> st.SearchStrategy[Damage]:
    """Damage to one seed, each with the outcome the format says it must have."""
    data, size = seed.data, len(seed.data)
    u32 = st.integers(0, 2**32 - 1)
    beyond = st.integers(size, 2**64 - 1)  # more than the whole file: it cannot be there
    entries = seed.entries
    strings = [p for p, types in entries.values() if types == [GGUFValueType.STRING]]
    arrays = [p for p, types in entries.values() if types[0] == GGUFValueType.ARRAY]
    integers = [entries[k][0] for k in REQUIRED[1:]]  # all four are uint32 in the seeds
    names = list(seed.tensors)
    # The first dimension of a tensor's (the length of its rows, in ggml's order).
    quantised_rows = [
        Part(p[3].offset, 8) for p, t in seed.tensors.values() if t == GGMLQuantizationType.Q8_0
    ]
    norms = [
        Part(p[3].offset, 8) for n, (p, _) in seed.tensors.items() if n.endswith("norm.weight")
    ]

    def same_length_pairs(found: list[str]) -> list[tuple[str, str]]:
        return [(a, b) for a in found for b in found if a != b and len(a) == len(b)]

    def renamed(name: str, at: int, letter: str) -> str:
        at %= len(name)
        return name[:at] + (letter if letter != name[at] else "Z") + name[at + 1 :]

    def missing(key: str, at: int, letter: str) -> Damage:
        new = renamed(key, at, letter)
        changed = put(data, entries[key][0][1], new.encode())
        if new in entries:  # one letter made it another key the file holds
            return Damage(f"{key} renamed {new}", changed, Cause.DUPLICATE)
        return Damage(f"{key} renamed {new}", changed, Cause.MISSING_KEY)

    def moved(name: str, offset: int) -> Damage:
        """A tensor's offset set to ``offset``: where the one before it ends, elsewhere in the
        file (llama.cpp would refuse it), or past the end."""
        was, length = seed.placed[name]
        changed = put(data, seed.tensors[name][0][5], offset)
        if offset == was:
            return Damage(f"{name} kept at {offset}", changed, seed.summary)
        if seed.data_start + offset + length <= size:
            return Damage(f"{name} moved to {offset}", changed, Cause.TENSOR_MISPLACED)
        return Damage(f"{name} moved to {offset}", changed, Cause.TENSOR_OUTSIDE_FILE)

    kinds: list[st.SearchStrategy[Damage]] = [
        st.builds(
            lambda at, b: Damage("magic", put(data, Part(at, 1), bytes([b])), Cause.BAD_MAGIC),
            st.integers(0, 3),
            st.integers(0, 255).filter(lambda b: b not in b"GUF"),
        ),
        st.builds(
            lambda v: Damage(f"version {v}", put(data, Part(4, 4), v), Cause.UNSUPPORTED_VERSION),
            u32.filter(lambda v: v & 0xFFFF and v not in (2, 3)),
        ),
        st.just(Damage("no tensors", put(data, Part(8, 8), 0), Cause.NO_TENSORS)),
        st.builds(
            lambda at, v: Damage(f"count {v}", put(data, Part(at, 8), v), Cause.BEYOND_FILE),
            st.sampled_from((8, 16)),
            beyond,
        ),
        st.builds(  # a metadata value's type, or an array's item type, the format lacks
            lambda p, v: Damage(f"value type {v}", put(data, p, v), Cause.BAD_VALUE_TYPE),
            st.sampled_from([p[2] for p, _ in entries.values()] + [p[3] for p in arrays]),
            u32.filter(lambda v: v not in VALUE_TYPES),
        ),
        st.builds(  # a key's, a string's, an array's or a tensor name's length
            lambda p, v: Damage(f"length {v}", put(data, p, v), Cause.BEYOND_FILE),
            st.sampled_from(
                [p[0] for p, _ in entries.values()]
                + [p[3] for p in strings]
                + [p[4] for p in arrays]
                + [p[0] for p, _ in seed.tensors.values()]
            ),
            beyond,
        ),
        st.builds(
            lambda p, v: Damage(f"dimensions {v}", put(data, p, v), Cause.BEYOND_FILE),
            st.sampled_from([p[2] for p, _ in seed.tensors.values()]),
            st.integers(size, 2**32 - 1),
        ),
        st.builds(
            lambda p, v: Damage(f"tensor type {v}", put(data, p, v), Cause.BAD_TENSOR_TYPE),
            st.sampled_from([p[4] for p, _ in seed.tensors.values()]),
            u32.filter(lambda v: v not in TENSOR_TYPES),
        ),
        st.builds(  # an offset past the end, or one the reader's 64-bit sum overflows
            lambda p, v: Damage(
                f"offset {v}",
                put(data, p, v),
                Cause.OVERFLOW if seed.data_start + v >= 2**64 else Cause.TENSOR_OUTSIDE_FILE,
            ),
            st.sampled_from([p[5] for p, _ in seed.tensors.values()]),
            beyond,
        ),
        st.builds(moved, st.sampled_from(names), st.integers(0, size)),
        st.builds(  # a norm's one dimension, larger than the file
            lambda p, v: Damage(f"norm of {v}", put(data, p, v), Cause.TENSOR_OUTSIDE_FILE),
            st.sampled_from(norms),
            st.integers(size, 2**40),
        ),
        st.builds(  # a name byte that cannot be in UTF-8 text among ASCII
            lambda p, at, b: Damage(
                "name byte", put(data, Part(p.offset + at % p.width, 1), bytes([b])), Cause.NOT_UTF8
            ),
            st.sampled_from(
                [p[1] for p, _ in entries.values()] + [p[1] for p, _ in seed.tensors.values()]
            ),
            st.integers(0, 2**16),
            st.integers(0x80, 0xFF),
        ),
        st.builds(
            missing, st.sampled_from(REQUIRED), st.integers(0, 2**16), st.sampled_from("abcxyz_0")
        ),
        st.builds(
            lambda p, v: Damage(f"required {v}", put(data, p[3], v), Cause.BAD_VALUE),
            st.sampled_from(integers),
            st.just(0),
        ),
        st.builds(
            lambda p: Damage(
                "float", put(data, p[2], int(GGUFValueType.FLOAT32)), Cause.WRONG_TYPE
            ),
            st.sampled_from(integers),
        ),
        st.builds(  # a key, or a tensor name, given another's name of the same length
            lambda pair, table: Damage(
                f"{pair[0]} as {pair[1]}",
                put(data, table[pair[0]][0][1], pair[1].encode()),
                Cause.DUPLICATE,
            ),
            st.sampled_from(same_length_pairs(list(entries)) + same_length_pairs(names)),
            st.just({**entries, **seed.tensors}),
        ),
        st.builds(  # any change to the tensor data alone: the same summary
            lambda at, b: Damage(
                "data",
                put(
                    data,
                    Part(seed.data_start + at % (seed.data_end - seed.data_start), 1),
                    bytes([b]),
                ),
                seed.summary,
            ),
            st.integers(0, 2**32),
            st.integers(0, 255),
        ),
    ]
    if quantised_rows:  # a row of a Q8_0 tensor that is not a whole number of 32-value blocks
        kinds.append(
            st.builds(
                lambda p, v: Damage(f"row {v}", put(data, p, v), Cause.BAD_TENSOR_SHAPE),
                st.sampled_from(quantised_rows),
                st.integers(1, 2**20).filter(lambda v: v % 32),
            )
        )
    return st.one_of(kinds)


def test_damage_with_a_known_failure(seeds: tuple[Seed, ...], tmp_path: Path) -> None:
    path, executed = tmp_path / "fuzz.gguf", []
    cases = st.one_of([damages(seed) for seed in seeds])

    @settings(FUZZ, max_examples=SHARES["damage"])
    @given(cases)
    def damaged(damage: Damage) -> None:
        executed.append(1)
        assert outcome(path, damage.data) == damage.expected, damage.what

    run_property("damage", damaged, executed)
