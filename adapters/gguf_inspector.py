"""Model files' own metadata, read with ggml-org's ``gguf`` library (``GGUFReader``).

The reader does the parsing; this module bounds its work and turns every
failure into one ``ModelFileError`` line naming the file and the problem.

Why the work is bounded by the file's size: before the reader runs, the
fixed 24-byte header is checked (magic, a supported version, and tensor and
key-value counts no larger than the file could hold). While it runs, every
read it makes is refused when it would pass the end of the file (the stock
reader silently returns a short array there, and an array of numbers then
loops on for as many items as it declares), an array is refused when it
declares more items than the rest of the file could hold, one metadata value
may not exceed ``MAX_VALUE_BYTES``, and the reader stops after ``MAX_READS``
reads (about three times what a 256k-token vocabulary with its merges
needs). Every loop step of the reader reads at least one byte, so no input
can make it spin, and the worst input costs ``MAX_READS`` reads (the reader
takes about 5 microseconds and 300 bytes of memory per array item).
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from gguf import GGUFReader, GGUFValueType, Keys, LlamaFileType
from gguf.gguf_reader import READER_SUPPORTED_VERSIONS, ReaderField

from nodeau.domain.memory import Architecture
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.models import ModelFileError

MAX_READS = 4_000_000
MAX_VALUE_BYTES = 64 * 1024 * 1024
MAX_LAYERS = 10_000
MAX_EMBD = 1 << 20
MAX_HEAD_LENGTH = 1 << 16
MAX_FF = 1 << 22
MAX_VOCAB = 1 << 24
MAX_CONTEXT = 1 << 28

_HEADER = struct.Struct("<4sIQQ")
_MAGIC = b"GGUF"
# The smallest encodings: a tensor info (name length, dims count, type,
# offset) and a key-value (key length, value type, a one-byte value).
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8
_MIN_KV = 8 + 4 + 1
_INTEGER_TYPES = frozenset(
    {
        GGUFValueType.UINT8,
        GGUFValueType.INT8,
        GGUFValueType.UINT16,
        GGUFValueType.INT16,
        GGUFValueType.UINT32,
        GGUFValueType.INT32,
        GGUFValueType.UINT64,
        GGUFValueType.INT64,
    }
)
_ARCH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_ARRAY = int(GGUFValueType.ARRAY)
_TOKEN_EMBD = "token_embd.weight"
_MESSAGE_LIMIT = 160
_NUMBER = re.compile(r"\d+(?=\)?\s+is not a valid)")
MAX_EXPERTS = 1 << 16

# How llama.cpp treats some architectures (its src/models/*.cpp), which the file itself
# does not say. Encoder-only embedding models keep no KV cache and end in their
# embeddings, not logits (llama_model::create_memory).
_ENCODERS = frozenset(
    {
        "bert",
        "jina-bert-v2",
        "jina-bert-v3",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "eurobert",
        "modern-bert",
        "gemma-embedding",
    }
)
# Interleaved sliding-window attention: the default layer pattern (period, dense layer
# first) when the file has no <arch>.attention.sliding_window_pattern. An architecture
# not listed counts every layer as full: the larger, never-under, cache.
_SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma3n": (5, False),
    "gemma-embedding": (6, False),
    "cohere2": (4, False),
    "exaone4": (4, False),
    "olmo2": (4, False),
    "llama4": (4, False),
    "gpt-oss": (2, False),
    "modern-bert": (3, True),
}


class GgufModelInspector:
    """``ModelInspector`` over GGUF files, with the ``gguf`` package's reader."""

    def inspect(self, path: Path) -> ModelSummary:
        size = _regular_file_size(path)
        _check_header(path, size)
        try:
            with np.errstate(all="raise"):
                reader = _BoundedReader(path)
                return _summary(path, reader)
        except ModelFileError:
            raise
        except _OutOfBounds as exc:
            raise ModelFileError(path, exc.problem) from exc
        except Exception as exc:  # the reader's failures are many and undocumented
            raise ModelFileError(path, _reader_problem(exc)) from exc


def _regular_file_size(path: Path) -> int:
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise ModelFileError(path, "no such file") from exc
    except OSError as exc:
        raise ModelFileError(path, f"cannot read ({_one_line(exc.strerror)})") from exc
    if stat.S_ISDIR(st.st_mode):
        raise ModelFileError(path, "is a directory, not a GGUF file")
    if not stat.S_ISREG(st.st_mode):
        raise ModelFileError(path, "is not a regular file")
    if st.st_size == 0:
        raise ModelFileError(path, "is empty, not a GGUF file")
    return st.st_size


def _check_header(path: Path, size: int) -> None:
    """Magic, version and counts: a bound check, so the reader never starts on an absurd file."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER.size)
    except OSError as exc:
        raise ModelFileError(path, f"cannot read ({_one_line(exc.strerror)})") from exc
    if head[: len(_MAGIC)] != _MAGIC:
        raise ModelFileError(path, f"not a GGUF file (bad magic {head[:4]!r})")
    if len(head) < _HEADER.size:
        raise ModelFileError(
            path, f"truncated: the {_HEADER.size}-byte GGUF header ends at byte {size}"
        )
    _, version, tensors, kvs = _HEADER.unpack(head)
    if version & 0xFFFF == 0:  # written for the other byte order; the reader handles it
        _, version, tensors, kvs = struct.unpack(">4sIQQ", head)
    if version not in READER_SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in READER_SUPPORTED_VERSIONS)
        raise ModelFileError(path, f"GGUF version {version} is not supported ({supported} are)")
    if _HEADER.size + tensors * _MIN_TENSOR_INFO + kvs * _MIN_KV > size:
        raise ModelFileError(
            path,
            f"truncated or corrupt: declares {tensors} tensors and {kvs} metadata entries, "
            f"more than a file of {size} bytes can hold",
        )


class _OutOfBounds(Exception):
    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class _BoundedReader(GGUFReader):
    """``GGUFReader`` whose every read is bounds-checked and counted (see the module doc)."""

    def __init__(self, path: Path) -> None:
        self._part = "header"
        self._reads = 0
        self._bytes: npt.NDArray[np.uint8] | None = None
        super().__init__(path, mode="r")

    def _get(
        self,
        offset: int,
        dtype: npt.DTypeLike,
        count: int = 1,
        override_order: Literal["I", "S", "<"] | None = None,
    ) -> npt.NDArray[Any]:
        if self._bytes is None:
            # A plain view of the map: slicing a memmap costs several times more per read.
            self._bytes = self.data.view(np.ndarray)
        start, count = int(offset), int(count)
        end = start + np.dtype(dtype).itemsize * count
        size = self._bytes.shape[0]
        self._reads += 1
        if end > size:
            raise _OutOfBounds(
                f"truncated or corrupt: {self._part} at byte {start} needs {end - start} bytes, "
                f"but the file ends at byte {size}"
            )
        if end - start > MAX_VALUE_BYTES and self._part != "tensor data":
            raise _OutOfBounds(
                f"corrupt: a {self._part} value at byte {start} declares {end - start} bytes"
            )
        if self._reads > MAX_READS:
            raise _OutOfBounds(f"corrupt: more than {MAX_READS} metadata values")
        arr = self._bytes[start:end].view(dtype=dtype)
        order = self.byte_order if override_order is None else override_order
        return arr.view(arr.dtype.newbyteorder(order))

    def _get_field_parts(
        self, orig_offs: int, raw_type: int
    ) -> tuple[int, list[npt.NDArray[Any]], list[int], list[GGUFValueType]]:
        if raw_type == _ARRAY:  # an int: enum member lookups cost more than the read
            # An array's item type and length come first; refuse a length the
            # rest of the file cannot hold before the reader loops over it.
            item_type = int(self._get(orig_offs, np.uint32)[0])
            length = int(self._get(orig_offs + 4, np.uint64)[0])
            room = self.data.shape[0] - (orig_offs + 12)
            if length * _min_item_bytes(item_type) > room:
                raise _OutOfBounds(
                    f"truncated or corrupt: an array at byte {orig_offs} declares {length} items, "
                    f"more than the {room} bytes after it can hold"
                )
        return super()._get_field_parts(orig_offs, raw_type)

    def _build_fields(self, offs: int, count: int) -> int:
        self._part = "metadata"
        return super()._build_fields(offs, count)

    def _build_tensor_info(self, offs: int, count: int) -> tuple[int, list[ReaderField]]:
        self._part = "tensor info"
        return super()._build_tensor_info(offs, count)

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        self._part = "tensor data"
        super()._build_tensors(start_offs, fields)


def _min_item_bytes(item_type: int) -> int:
    if item_type == GGUFValueType.STRING:
        return 8  # its length
    if item_type == GGUFValueType.ARRAY:
        return 12  # its item type and length
    scalar = GGUFReader.gguf_scalar_to_np.get(item_type)  # type: ignore[call-overload]
    return 1 if scalar is None else np.dtype(scalar).itemsize


def _reader_problem(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "corrupt: a key, tensor name or text value is not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "corrupt: arrays nested too deeply"
    if isinstance(exc, MemoryError):
        return "too large to read (out of memory)"
    if isinstance(exc, FloatingPointError):
        return "corrupt: an offset or size overflows"
    text = str(exc)
    for enum, what in (
        ("GGUFValueType", "metadata value type"),
        ("GGMLQuantizationType", "tensor type"),
    ):
        if text.endswith(f"is not a valid {enum}"):
            number = _NUMBER.search(text)
            return f"corrupt: unknown {what} {number.group() if number else '?'}"
    detail = exc.args[0] if len(exc.args) == 1 else exc
    return f"not a well-formed GGUF file ({type(exc).__name__}: {_one_line(str(detail))})"


def _one_line(text: object) -> str:
    """Printable, one line and short: reader messages may quote bytes from the file."""
    clean = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))
    return clean if len(clean) <= _MESSAGE_LIMIT else clean[: _MESSAGE_LIMIT - 3] + "..."


# --- from the reader's fields to the domain's summary -------------------------------------


class _Fields:
    """Typed access to the metadata: a wrong type or value is a ModelFileError naming the key."""

    def __init__(self, path: Path, reader: GGUFReader) -> None:
        self._path = path
        self._fields = reader.fields

    def error(self, key: str, problem: str) -> ModelFileError:
        return ModelFileError(self._path, f"key {key} {problem}")

    def has(self, key: str) -> bool:
        return key in self._fields

    def _field(self, key: str) -> ReaderField:
        field = self._fields.get(key)
        if field is None:
            raise ModelFileError(self._path, f"missing key {key}")
        return field

    def _type_error(self, key: str, field: ReaderField, expected: str) -> ModelFileError:
        found = "/".join(t.name.lower() for t in field.types) or "unknown"
        return self.error(key, f"has type {found}, expected {expected}")

    def any_text(self, key: str) -> str:
        """A string value, newlines and all (a chat template)."""
        field = self._field(key)
        if field.types != [GGUFValueType.STRING]:
            raise self._type_error(key, field, "a string")
        try:
            return bytes(field.parts[field.data[0]]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(key, "is not valid UTF-8 text") from exc

    def text(self, key: str) -> str:
        """A one-line string value (a name)."""
        value = self.any_text(key)
        if not value.isprintable():
            raise self.error(key, "holds unprintable characters")
        return value

    def integers(self, key: str) -> list[int]:
        """An integer, or an array of integers (one per layer); never empty."""
        field = self._field(key)
        types = field.types
        if len(types) == 1 and types[0] in _INTEGER_TYPES:
            return [int(field.parts[field.data[0]][0])]
        if len(types) == 2 and types[0] == GGUFValueType.ARRAY and types[1] in _INTEGER_TYPES:
            return [int(field.parts[i][0]) for i in field.data]
        if types == [GGUFValueType.ARRAY]:
            raise self.error(key, "is an empty array, expected an integer")
        raise self._type_error(key, field, "an integer")

    def flags(self, key: str) -> list[int]:
        """An integer or boolean, or an array of them (one per layer), as integers."""
        field = self._field(key)
        types = field.types
        if types and types[-1] == GGUFValueType.BOOL and len(types) <= 2:
            if len(types) == 1:
                return [int(field.parts[field.data[0]][0])]
            return [int(field.parts[i][0]) for i in field.data] or [0]
        values = self.integers(key)
        if any(v < 0 for v in values):
            raise self.error(key, f"is negative ({min(values)})")
        return values

    def integer(self, key: str, low: int, high: int, *, per_layer: bool = False) -> int:
        values = self.integers(key)
        if len(values) > 1 and not per_layer:
            raise self._type_error(key, self._field(key), "an integer")
        if any(v < 0 for v in values):
            raise self.error(key, f"is negative ({min(values)}), expected {low} to {high}")
        value = max(values)  # per layer: the largest layer decides the memory
        if not low <= value <= high:
            raise self.error(key, f"is {value}, expected {low} to {high}")
        return value

    def string_count(self, key: str) -> int:
        field = self._field(key)
        if field.types not in ([GGUFValueType.ARRAY, GGUFValueType.STRING], [GGUFValueType.ARRAY]):
            raise self._type_error(key, field, "an array of strings")
        return len(field.data)


def _summary(path: Path, reader: GGUFReader) -> ModelSummary:
    kv = _Fields(path, reader)
    arch = kv.text(Keys.General.ARCHITECTURE)
    if not _ARCH_NAME.fullmatch(arch):
        raise kv.error(
            Keys.General.ARCHITECTURE, f"is {_one_line(arch)!r}, not an architecture name"
        )

    def key(template: str) -> str:
        return template.format(arch=arch)

    n_layers = kv.integer(key(Keys.LLM.BLOCK_COUNT), 1, MAX_LAYERS)
    n_embd = kv.integer(key(Keys.LLM.EMBEDDING_LENGTH), 1, MAX_EMBD)
    n_head = kv.integer(key(Keys.Attention.HEAD_COUNT), 1, n_embd, per_layer=True)
    n_head_kv = n_head
    if kv.has(key(Keys.Attention.HEAD_COUNT_KV)):
        n_head_kv = kv.integer(key(Keys.Attention.HEAD_COUNT_KV), 1, n_head, per_layer=True)
    lengths = {}
    for template in (Keys.Attention.KEY_LENGTH, Keys.Attention.VALUE_LENGTH):
        name = key(template)
        lengths[template] = (
            kv.integer(name, 1, MAX_HEAD_LENGTH) if kv.has(name) else n_embd // n_head
        )
    n_ff = 0
    if kv.has(key(Keys.LLM.FEED_FORWARD_LENGTH)):
        n_ff = kv.integer(key(Keys.LLM.FEED_FORWARD_LENGTH), 0, MAX_FF, per_layer=True)
    context = kv.integer(key(Keys.LLM.CONTEXT_LENGTH), 1, MAX_CONTEXT)
    window = 0
    if kv.has(key(Keys.Attention.SLIDING_WINDOW)):
        window = kv.integer(key(Keys.Attention.SLIDING_WINDOW), 0, MAX_CONTEXT)
    swa_layers = _swa_layers(kv, arch, n_layers) if window else 0
    n_expert = n_expert_used = 0
    if kv.has(key(Keys.LLM.EXPERT_COUNT)):
        n_expert = kv.integer(key(Keys.LLM.EXPERT_COUNT), 0, MAX_EXPERTS)
    if n_expert and kv.has(key(Keys.LLM.EXPERT_USED_COUNT)):
        n_expert_used = kv.integer(key(Keys.LLM.EXPERT_USED_COUNT), 0, n_expert)

    tensors = reader.tensors
    if not tensors:
        raise ModelFileError(path, "holds no tensors (a vocabulary-only file is not a model)")
    has_tokenizer = kv.has(Keys.Tokenizer.LIST)
    n_vocab = _vocab_size(path, kv, arch, reader)
    if not 1 <= n_vocab <= MAX_VOCAB:
        raise ModelFileError(path, f"vocabulary of {n_vocab} tokens, expected 1 to {MAX_VOCAB}")
    has_chat_template = kv.has(Keys.Tokenizer.CHAT_TEMPLATE)
    if has_chat_template:
        kv.any_text(Keys.Tokenizer.CHAT_TEMPLATE)

    bytes_by_type: Counter[str] = Counter()
    for tensor in tensors:
        bytes_by_type[tensor.tensor_type.name] += int(tensor.n_bytes)
    quantisation = min(bytes_by_type, key=lambda name: (-bytes_by_type[name], name))

    return ModelSummary(
        architecture=Architecture(
            name=arch,
            n_layers=n_layers,
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            key_length=lengths[Keys.Attention.KEY_LENGTH],
            value_length=lengths[Keys.Attention.VALUE_LENGTH],
            n_vocab=n_vocab,
            n_ff=n_ff,
            context_length=context,
            sliding_window=window if swa_layers else 0,
            swa_layers=swa_layers,
            kv_cache=arch not in _ENCODERS,
            lm_head=arch not in _ENCODERS,
            n_expert=n_expert,
            n_expert_used=n_expert_used,
        ),
        name=kv.text(Keys.General.NAME) if kv.has(Keys.General.NAME) else None,
        file_type=_file_type(kv),
        quantisation=quantisation,
        tensor_count=len(tensors),
        tensor_bytes=sum(int(t.n_bytes) for t in tensors),
        has_tokenizer=has_tokenizer,
        has_chat_template=has_chat_template,
    )


def _swa_layers(kv: _Fields, arch: str, n_layers: int) -> int:
    """How many layers keep only a window, as llama.cpp's ``load_swa_pattern`` decides: a
    per-layer array in the file, else a period in the file, else the architecture's own."""
    name = Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=arch)
    period, dense_first = _SWA_PATTERNS.get(arch, (1, False))
    if kv.has(name):
        values = kv.flags(name)
        if len(values) > 1:
            return sum(1 for v in values[:n_layers] if v)
        period = values[0]
    elif arch not in _SWA_PATTERNS:
        return 0
    if period == 0:
        return n_layers
    if dense_first:
        return sum(1 for il in range(n_layers) if il % period != 0)
    return sum(1 for il in range(n_layers) if il % period < period - 1)


def _vocab_size(path: Path, kv: _Fields, arch: str, reader: GGUFReader) -> int:
    if kv.has(Keys.Tokenizer.LIST):
        return kv.string_count(Keys.Tokenizer.LIST)
    vocab_key = Keys.LLM.VOCAB_SIZE.format(arch=arch)
    if kv.has(vocab_key):
        return kv.integer(vocab_key, 1, MAX_VOCAB)
    for tensor in reader.tensors:
        if tensor.name == _TOKEN_EMBD and len(tensor.shape) >= 2:
            return int(tensor.shape[1])  # ggml order: (n_embd, n_vocab)
    raise ModelFileError(
        path,
        f"declares no vocabulary size (no {Keys.Tokenizer.LIST}, {vocab_key} or {_TOKEN_EMBD})",
    )


def _file_type(kv: _Fields) -> str | None:
    if not kv.has(Keys.General.FILE_TYPE):
        return None
    value = kv.integer(Keys.General.FILE_TYPE, 0, 0xFFFF_FFFF)
    try:
        return LlamaFileType(value).name
    except ValueError:
        return f"unknown ({value})"
