"""The property every fuzzed GGUF file must keep, and the seeds the fuzz damages.

``outcome``: ``inspect`` gives a possible ModelSummary (``check_summary``, as ``GGUFReader`` reads
it) or a one-line ModelFileError whose ``cause`` is in ``CAUSES`` and says it (``WORDS``), within
``HANG_SECONDS``. Derandomized; the properties' shares add up to ``TOTAL_EXAMPLES``.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from gguf import GGUFReader
from hypothesis import HealthCheck, settings

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.models import ModelFileCause as Cause
from nodeau.ports.models import ModelFileError
from tests.support.builders.tiny_gguf import part_offsets, write_tiny_llama

TOTAL_EXAMPLES = 10_000
SHARES = {"mutations": 4_500, "numbers": 2_000, "random": 1_000, "damage": 2_000, "cuts": 500}
assert sum(SHARES.values()) >= TOTAL_EXAMPLES
HANG_SECONDS = 10  # a hang guard, far above the milliseconds one file takes; not a timing test


# Every failure a file's bytes can have. Not here: no file, a directory, a read the
# operating system refuses (the fuzz writes a regular file) and running out of memory
# (the reader's work is bounded): any of those, or a cause added later, fails the fuzz.
CAUSES = frozenset(
    {
        Cause.EMPTY,
        Cause.BAD_MAGIC,
        Cause.TRUNCATED_HEADER,
        Cause.UNSUPPORTED_VERSION,
        Cause.BEYOND_FILE,
        Cause.OVER_LIMIT,
        Cause.BAD_VALUE_TYPE,
        Cause.NESTED_TOO_DEEP,
        Cause.NOT_UTF8,
        Cause.DUPLICATE,
        Cause.BAD_ALIGNMENT,
        Cause.BAD_TENSOR_TYPE,
        Cause.BAD_TENSOR_SHAPE,
        Cause.OVERFLOW,
        Cause.TENSOR_OUTSIDE_FILE,
        Cause.TENSOR_MISPLACED,
        Cause.MISSING_KEY,
        Cause.WRONG_TYPE,
        Cause.BAD_VALUE,
        Cause.NO_TENSORS,
        Cause.NO_VOCABULARY,
    }
)
# What the one line says for each cause (after "<path>: ").
WORDS = {
    Cause.EMPTY: r"is empty, not a GGUF file",
    Cause.BAD_MAGIC: r"not a GGUF file \(bad magic b.*\)",
    Cause.TRUNCATED_HEADER: r"truncated: the 24-byte GGUF header ends at byte \d+",
    Cause.UNSUPPORTED_VERSION: r"GGUF version \d+ is not supported \(2, 3 are\)",
    Cause.BEYOND_FILE: (
        r"truncated or corrupt: (declares \d+ tensors and \d+ metadata entries, more than a "
        r"file of \d+ bytes can hold|(metadata|tensor info) at byte \d+ needs \d+ bytes, but "
        r"the file ends at byte \d+|an array at byte \d+ declares \d+ items, more than the "
        r"-?\d+ bytes after it can hold)"
    ),
    Cause.OVER_LIMIT: (
        r"corrupt: (a (metadata|tensor info) value at byte \d+ declares \d+ bytes"
        r"|more than \d+ metadata values)"
    ),
    Cause.BAD_VALUE_TYPE: r"corrupt: unknown metadata value type \d+",
    Cause.NESTED_TOO_DEEP: r"corrupt: arrays nested too deeply",
    Cause.NOT_UTF8: (
        r"corrupt: a (metadata key|tensor name) is not valid UTF-8|key \S+ is not valid UTF-8 text"
    ),
    Cause.DUPLICATE: r"corrupt: (metadata key|tensor) '.*' appears twice",
    Cause.BAD_ALIGNMENT: r"corrupt: general\.alignment is not a power of two \(.*\)",
    Cause.BAD_TENSOR_TYPE: r"corrupt: unknown tensor type \d+",
    Cause.BAD_TENSOR_SHAPE: r"corrupt: a tensor's shape does not fit its type \(.*\)",
    Cause.OVERFLOW: r"corrupt: a tensor's offset or size overflows",
    Cause.TENSOR_OUTSIDE_FILE: (
        r"truncated or corrupt: tensor data at byte \d+ needs \d+ bytes, "
        r"but the file ends at byte \d+"
    ),
    Cause.TENSOR_MISPLACED: (
        r"corrupt: tensor '.*' starts \d+ bytes into the data, not at \d+ where the tensor "
        r"before it ends"
    ),
    Cause.MISSING_KEY: r"missing key \S+",
    Cause.WRONG_TYPE: r"key \S+ (has type \S+, expected .+|is an empty array, expected an integer)",
    Cause.BAD_VALUE: (
        r"key \S+ (is -?\d+, expected \d+ to \d+|is negative \(-?\d+\)(, expected \d+ to \d+)?"
        r"|is '.*', not an architecture name|holds unprintable characters)"
        r"|vocabulary of \d+ tokens, expected 1 to \d+"
    ),
    Cause.NO_TENSORS: r"holds no tensors \(a vocabulary-only file is not a model\)",
    Cause.NO_VOCABULARY: (
        r"declares no vocabulary size \(no tokenizer\.ggml\.tokens, \S+\.vocab_size "
        r"or token_embd\.weight\)"
    ),
}
assert set(WORDS) == CAUSES
Outcome = ModelSummary | Cause


class Hang(BaseException):
    """Not an Exception, so nothing on the way can swallow it."""


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


def outcome(path: Path, data: bytes) -> Outcome:
    """The property: a possible summary, or one ModelFileError line of a known cause."""
    path.write_bytes(data)
    try:
        with hang_guard():
            result = GgufModelInspector().inspect(path)
    except ModelFileError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: "), message
        assert "\n" not in message and "\r" not in message, message
        assert exc.path == str(path)
        assert exc.cause in CAUSES, (exc.cause, message)
        assert re.fullmatch(WORDS[exc.cause], exc.problem), (exc.cause, message)
        return exc.cause
    check_summary(result, path, data)
    return result


def check_summary(summary: ModelSummary, path: Path, data: bytes) -> None:
    """The invariants of every summary, and its tensors as the stock reader reads them."""
    arch = summary.architecture
    positive = (
        arch.n_layers,
        arch.n_embd,
        arch.n_head,
        arch.n_head_kv,
        arch.key_length,
        arch.value_length,
        arch.n_vocab,
        arch.context_length,
    )
    assert min(positive) >= 1, arch
    assert arch.n_head_kv <= arch.n_head <= arch.n_embd, arch
    assert arch.n_ff >= 0 and 0 <= arch.n_expert_used <= arch.n_expert, arch
    assert 0 <= arch.swa_layers <= arch.n_layers, arch
    assert (arch.sliding_window > 0) == (arch.swa_layers > 0), arch
    assert summary.tensor_count >= 1 and 0 <= summary.tensor_bytes <= len(data), summary
    stock = GGUFReader(path)  # the inspector read it within bounds, so this one ends too
    assert summary.tensor_count == len(stock.tensors)
    assert summary.tensor_bytes == sum(int(t.n_bytes) for t in stock.tensors)
    for tensor in stock.tensors:
        assert tensor.data_offset >= 0 and tensor.data_offset + tensor.n_bytes <= len(data)
    assert summary.quantisation in {t.tensor_type.name for t in stock.tensors}
    assert stock.fields["general.architecture"].contents() == arch.name


class Part(NamedTuple):
    offset: int
    width: int


class Seed:
    """A valid tiny model's bytes, its summary, and where each of its numbers and names lie."""

    def __init__(self, path: Path, **kwargs: object) -> None:
        write_tiny_llama(path, **kwargs)  # type: ignore[arg-type]
        self.data = path.read_bytes()
        self.summary = GgufModelInspector().inspect(path)
        starts = sorted({o for offsets in part_offsets(path).values() for o in offsets})
        self.number_offsets = tuple(starts)
        self.metadata_end = max(starts) + 8  # past the last tensor info: the data follows
        reader = GGUFReader(path)

        def parts(field: object) -> tuple[Part, ...]:
            at, found = field.offset, []  # type: ignore[attr-defined]
            for part in field.parts:  # type: ignore[attr-defined]
                found.append(Part(at, int(part.nbytes)))
                at += int(part.nbytes)
            return tuple(found)

        self.entries = {
            name: (parts(field), field.types)
            for name, field in reader.fields.items()
            if not name.startswith("GGUF.")
        }
        self.tensors = {t.name: (parts(t.field), t.tensor_type) for t in reader.tensors}
        # Each tensor's offset from the start of the data, and its size in bytes.
        self.placed = {
            t.name: (int(t.data_offset) - int(reader.data_offset), int(t.n_bytes))
            for t in reader.tensors
        }
        self.info_end = max(p[-1].offset + p[-1].width for p, _ in self.tensors.values())
        self.data_start = int(reader.data_offset)
        self.data_end = max(int(t.data_offset) + int(t.n_bytes) for t in reader.tensors)
        assert self.info_end <= self.data_start < self.data_end <= len(self.data)
        ends = (self.info_end, self.data_start, self.data_end, len(self.data))
        self.boundaries = tuple(sorted({e + d for e in ends for d in (-1, 0)}))


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
