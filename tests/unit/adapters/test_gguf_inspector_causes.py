"""Each failure the GGUF inspector tells apart, once: a file made with the ``gguf`` writer
(tests/support/builders/tiny_gguf.py), damaged in one place, and the cause and the exact line it
is refused with. The fuzz (tests/fuzz/test_gguf_*.py) runs thousands of these."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from gguf import GGUFReader, GGUFValueType

from nodeau.adapters import gguf_inspector
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.ports.models import ModelFileCause as Cause
from nodeau.ports.models import ModelFileError
from tests.support.builders.tiny_gguf import part_offsets, write_tiny_llama

U32, STR = GGUFValueType.UINT32, GGUFValueType.STRING


def q8(path: Path, **kwargs: object) -> Path:
    """The one-layer Q8_0 tiny model (12 tensors), with ``write_tiny_llama``'s options."""
    shape = dict(n_layers=1, n_embd=32, n_head=2, n_head_kv=1, n_ff=32, quant="q8_0")
    return write_tiny_llama(path, **(shape | kwargs))  # type: ignore[arg-type]


def damaged(path: Path, offset: int, value: bytes) -> Path:
    data = bytearray(path.read_bytes())
    data[offset : offset + len(value)] = value
    path.write_bytes(bytes(data))
    return path


def at(path: Path, name: str, part: int) -> int:
    """Where part ``part`` of the metadata entry or tensor info ``name`` starts."""
    return part_offsets(path)[name][part]


def u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def deep_arrays(path: Path, depth: int) -> Path:
    """A GGUF file whose one metadata value is an array of an array ... ``depth`` deep."""
    key = b"deep"
    body = struct.pack("<Q", len(key)) + key + struct.pack("<I", GGUFValueType.ARRAY)
    body += struct.pack("<IQ", GGUFValueType.ARRAY, 1) * depth
    body += struct.pack("<IQ", GGUFValueType.UINT8, 1) + b"\x07"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body)
    return path


def cut(path: Path, length: int) -> Path:
    path.write_bytes(path.read_bytes()[:length])
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def no_vocabulary(path: Path) -> Path:
    q8(path, tokenizer=False)
    return damaged(path, at(path, "token_embd.weight", 1), b"TOKEN")  # "TOKEN_embd.weight"


# Each case: how to make the file from a path, the cause, and the line after "<path>: "
# (a callable where the line names the file's own size or offsets).
Case = tuple[Callable[[Path], Path], Cause, str | Callable[[Path], str]]


def _end_of(path: Path) -> int:
    return len(path.read_bytes())


def _valid_at(path: Path, name: str, part: int) -> int:
    """``at`` in the undamaged file (the stock reader cannot read the damaged one)."""
    return at(q8(path.with_name("valid.gguf")), name, part)


def _outside(path: Path) -> str:
    valid = GGUFReader(q8(path.with_name("valid.gguf")))
    start = valid.data_offset + 2**20  # tensor offsets count from where the data starts
    return (
        f"truncated or corrupt: tensor data at byte {start} needs "
        f"{valid.tensors[0].n_bytes} bytes, but the file ends at byte {_end_of(path)}"
    )


CASES: dict[str, Case] = {
    "absent": (lambda p: p, Cause.NO_FILE, "no such file"),
    "under a file": (
        lambda p: q8(p.with_name("file.gguf")) / "model.gguf",
        Cause.UNREADABLE,
        "cannot read (Not a directory)",
    ),
    "a directory": (
        lambda p: p.parent,
        Cause.NOT_A_FILE,
        "is a directory, not a GGUF file",
    ),
    "a fifo": (fifo, Cause.NOT_A_FILE, "is not a regular file"),
    "empty": (lambda p: cut(q8(p), 0), Cause.EMPTY, "is empty, not a GGUF file"),
    "GGML magic": (
        lambda p: damaged(q8(p), 0, b"GGML"),
        Cause.BAD_MAGIC,
        "not a GGUF file (bad magic b'GGML')",
    ),
    "header cut at 10": (
        lambda p: cut(q8(p), 10),
        Cause.TRUNCATED_HEADER,
        "truncated: the 24-byte GGUF header ends at byte 10",
    ),
    "version 4": (
        lambda p: damaged(q8(p), 4, struct.pack("<I", 4)),
        Cause.UNSUPPORTED_VERSION,
        "GGUF version 4 is not supported (2, 3 are)",
    ),
    "2**40 tensors": (
        lambda p: damaged(q8(p), 8, u64(2**40)),
        Cause.BEYOND_FILE,
        lambda p: (
            f"truncated or corrupt: declares {2**40} tensors and 20 metadata entries, "
            f"more than a file of {_end_of(p)} bytes can hold"
        ),
    ),
    "a name longer than the file": (
        lambda p: damaged(q8(p), at(p, "general.name", 3), u64(2**40)),
        Cause.BEYOND_FILE,
        lambda p: (
            f"truncated or corrupt: metadata at byte {_valid_at(p, 'general.name', 3) + 8} needs "
            f"{2**40} bytes, but the file ends at byte {_end_of(p)}"
        ),
    ),
    "2**40 tokens": (
        lambda p: damaged(q8(p), at(p, "tokenizer.ggml.tokens", 4), u64(2**40)),
        Cause.BEYOND_FILE,
        lambda p: (
            f"truncated or corrupt: an array at byte {_valid_at(p, 'tokenizer.ggml.tokens', 3)} "
            f"declares {2**40} items, more than the "
            f"{_end_of(p) - _valid_at(p, 'tokenizer.ggml.tokens', 3) - 12} bytes after it can hold"
        ),
    ),
    "value type 1234": (
        lambda p: damaged(q8(p), at(p, "general.name", 2), struct.pack("<I", 1234)),
        Cause.BAD_VALUE_TYPE,
        "corrupt: unknown metadata value type 1234",
    ),
    "arrays 5000 deep": (
        lambda p: deep_arrays(p, 5000),
        Cause.NESTED_TOO_DEEP,
        "corrupt: arrays nested too deeply",
    ),
    "a key not UTF-8": (
        lambda p: damaged(q8(p), at(p, "general.name", 1), b"\xff"),
        Cause.NOT_UTF8,
        "corrupt: a metadata key is not valid UTF-8",
    ),
    "a tensor name not UTF-8": (
        lambda p: damaged(q8(p), at(p, "output.weight", 1), b"\xc3"),
        Cause.NOT_UTF8,
        "corrupt: a tensor name is not valid UTF-8",
    ),
    "a name value not UTF-8": (
        lambda p: damaged(q8(p), at(p, "general.name", 4), b"\xe2\x28"),
        Cause.NOT_UTF8,
        "key general.name is not valid UTF-8 text",
    ),
    "bos renamed eos": (
        lambda p: damaged(q8(p), at(p, "tokenizer.ggml.bos_token_id", 1), b"tokenizer.ggml.eos"),
        Cause.DUPLICATE,
        "corrupt: metadata key 'tokenizer.ggml.eos_token_id' appears twice",
    ),
    "a tensor named twice": (
        lambda p: damaged(q8(p), at(p, "blk.0.attn_k.weight", 1), b"blk.0.attn_q"),
        Cause.DUPLICATE,
        "corrupt: tensor 'blk.0.attn_q.weight' appears twice",
    ),
    "alignment 3": (
        lambda p: q8(p, override_keys={"general.alignment": (3, U32)}),
        Cause.BAD_ALIGNMENT,
        "corrupt: general.alignment is not a power of two "
        "(Invalid alignment: must be a non-zero power of two)",
    ),
    "alignment as text": (
        lambda p: q8(p, override_keys={"general.alignment": ("32", STR)}),
        Cause.BAD_ALIGNMENT,
        "corrupt: general.alignment is not a power of two (Bad type for general.alignment field)",
    ),
    "tensor type 99": (
        lambda p: damaged(q8(p), at(p, "token_embd.weight", 4), struct.pack("<I", 99)),
        Cause.BAD_TENSOR_TYPE,
        "corrupt: unknown tensor type 99",
    ),
    "a Q8_0 row of 33": (
        lambda p: damaged(q8(p), at(p, "token_embd.weight", 3), u64(33)),
        Cause.BAD_TENSOR_SHAPE,
        "corrupt: a tensor's shape does not fit its type "
        "(Quantized tensor row size (33) is not a multiple of Q8_0 block size (32))",
    ),
    "an offset past 64 bits": (
        lambda p: damaged(q8(p), at(p, "token_embd.weight", 5), u64(2**64 - 1)),
        Cause.OVERFLOW,
        "corrupt: a tensor's offset or size overflows",
    ),
    "a tensor a MiB past the data": (
        lambda p: damaged(q8(p), at(p, "token_embd.weight", 5), u64(2**20)),
        Cause.TENSOR_OUTSIDE_FILE,
        _outside,
    ),
    "a tensor over the one before it": (
        lambda p: damaged(q8(p), at(p, "blk.0.attn_norm.weight", 5), u64(0)),
        Cause.TENSOR_MISPLACED,
        # token_embd before it: 355 rows of one 34-byte Q8_0 block, 12070 bytes, padded to 32
        "corrupt: tensor 'blk.0.attn_norm.weight' starts 0 bytes into the data, not at 12096 "
        "where the tensor before it ends",
    ),
    "no block count": (
        lambda p: q8(p, omit_keys={"llama.block_count"}),
        Cause.MISSING_KEY,
        "missing key llama.block_count",
    ),
    "a block count in words": (
        lambda p: q8(p, override_keys={"llama.block_count": ("two", STR)}),
        Cause.WRONG_TYPE,
        "key llama.block_count has type string, expected an integer",
    ),
    "no blocks": (
        lambda p: q8(p, override_keys={"llama.block_count": (0, U32)}),
        Cause.BAD_VALUE,
        "key llama.block_count is 0, expected 1 to 10000",
    ),
    "no tensors": (
        lambda p: damaged(q8(p), 8, u64(0)),
        Cause.NO_TENSORS,
        "holds no tensors (a vocabulary-only file is not a model)",
    ),
    "no vocabulary": (
        no_vocabulary,
        Cause.NO_VOCABULARY,
        "declares no vocabulary size (no tokenizer.ggml.tokens, llama.vocab_size or "
        "token_embd.weight)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_failure_has_its_cause_and_its_line(tmp_path: Path, case: str) -> None:
    make, cause, words = CASES[case]
    path = make(tmp_path / "model.gguf")
    with pytest.raises(ModelFileError) as caught:
        GgufModelInspector().inspect(path)
    expected = words if isinstance(words, str) else words(path)
    assert (caught.value.cause, caught.value.problem) == (cause, expected)
    assert str(caught.value) == f"{path}: {expected}"


def test_every_cause_but_running_out_of_memory_has_a_case() -> None:
    # OVER_LIMIT: test_the_read_bound_has_its_cause (a natural case is a 64 MiB value)
    covered = {cause for _, cause, _ in CASES.values()} | {Cause.OVER_LIMIT}
    assert covered == set(Cause) - {Cause.OUT_OF_MEMORY}


def test_the_read_bound_has_its_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gguf_inspector, "MAX_READS", 100)
    path = q8(tmp_path / "model.gguf")
    with pytest.raises(ModelFileError) as caught:
        GgufModelInspector().inspect(path)
    assert caught.value.cause is Cause.OVER_LIMIT
    assert caught.value.problem == "corrupt: more than 100 metadata values"


def test_a_failure_outside_the_reader_is_not_called_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in reading the summary surfaces as itself, not as a malformed file."""

    def broken(path: Path, reader: GGUFReader) -> None:
        raise IndexError("a bug in the summary")

    monkeypatch.setattr(gguf_inspector, "summary", broken)
    with pytest.raises(IndexError, match="a bug in the summary"):
        GgufModelInspector().inspect(q8(tmp_path / "model.gguf"))
