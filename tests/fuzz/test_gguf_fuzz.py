"""Fuzzing the GGUF inspector: 10,000+ mutated or random files, no crash, no hang.

The property, for every file: ``inspect`` returns a ModelSummary or raises
ModelFileError whose message is one line starting with the file's path;
never any other exception, and never longer than ``HANG_SECONDS`` (a hang
guard, far above the milliseconds one file takes, not a timing assertion).
Runs are derandomized, so CI sees the same files every time. Each property
checks that it really ran its share of examples; the shares add up to
``TOTAL_EXAMPLES``.
"""

from __future__ import annotations

import signal
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.models import ModelFileError
from tests.support.tiny_gguf import part_offsets, write_tiny_llama

pytestmark = pytest.mark.slow

TOTAL_EXAMPLES = 10_000
SHARES = {"mutations": 6_000, "numbers": 3_000, "random": 1_000}
assert sum(SHARES.values()) >= TOTAL_EXAMPLES
HANG_SECONDS = 10
INTERESTING = (0, 1, 2, 0x7F, 0xFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1)


class Hang(BaseException):
    """Not an Exception, so the adapter's boundary cannot swallow it."""


@contextmanager
def hang_guard() -> Iterator[None]:
    def alarm(_signum: int, _frame: FrameType | None) -> None:
        raise Hang(f"inspect ran past {HANG_SECONDS} s on one file")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def holds(path: Path, data: bytes) -> None:
    """The property: a summary, or one ModelFileError line naming the file."""
    path.write_bytes(data)
    try:
        with hang_guard():
            result = GgufModelInspector().inspect(path)
    except ModelFileError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: "), message
        assert "\n" not in message and "\r" not in message, message
        assert exc.path == str(path)
    else:
        assert isinstance(result, ModelSummary)


class Seed:
    """A valid tiny model's bytes, and where its numbers (lengths, counts, types) start."""

    def __init__(self, path: Path, **kwargs: object) -> None:
        write_tiny_llama(path, **kwargs)  # type: ignore[arg-type]
        self.data = path.read_bytes()
        starts = sorted({o for offsets in part_offsets(path).values() for o in offsets})
        self.number_offsets = tuple(starts)
        self.metadata_end = max(starts) + 8  # past the last tensor info: the data follows


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seed, ...]:
    folder = tmp_path_factory.mktemp("seeds")
    return (
        Seed(
            folder / "q8.gguf", n_layers=1, n_embd=32, n_head=2, n_head_kv=1, n_ff=32, quant="q8_0"
        ),
        Seed(
            folder / "f16.gguf",
            n_layers=2,
            n_embd=32,
            n_head=4,
            n_head_kv=2,
            n_ff=64,
            quant="f16",
            tokenizer=False,
        ),
    )


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


def run_property(share: str, test: Callable[[], None], executed: list[int]) -> None:
    test()
    print(f"{share}: {len(executed)} files inspected")
    assert len(executed) >= SHARES[share]


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
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
        holds(path, prefix + bytes(body))

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
        holds(path, bytes(body))

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
        holds(path, body)

    run_property("random", random_file, executed)
