"""Model files' own metadata, read with ggml-org's ``gguf`` library (``GGUFReader``).

Why it is so: docs/adr/decisions/adapters.md (gguf_inspector.py).
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType, Keys
from gguf.gguf_reader import READER_SUPPORTED_VERSIONS, ReaderField

from nodeau.adapters.gguf_summary import one_line, summary
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.models import ModelFileCause as Cause
from nodeau.ports.models import ModelFileError

MAX_READS = 4_000_000
MAX_VALUE_BYTES = 64 * 1024 * 1024

_HEADER = struct.Struct("<4sIQQ")
_MAGIC = b"GGUF"
# The smallest encodings: a tensor info (name length, dims count, type,
# offset) and a key-value (key length, value type, a one-byte value).
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8
_MIN_KV = 8 + 4 + 1
_ARRAY = int(GGUFValueType.ARRAY)
_VALUE_TYPES = frozenset(int(t) for t in GGUFValueType)
# A tensor type the reader can size: known to the enum and to the table of block sizes.
_TENSOR_TYPES = frozenset(int(t) for t in GGMLQuantizationType if t in GGML_QUANT_SIZES)


class GgufModelInspector:
    """``ModelInspector`` over GGUF files, with the ``gguf`` package's reader."""

    def inspect(self, path: Path) -> ModelSummary:
        size = _regular_file_size(path)
        _check_header(path, size)
        with np.errstate(all="raise"):
            try:
                reader = _BoundedReader(path)
            except _Refused as exc:
                raise ModelFileError(path, exc.problem, cause=exc.cause) from exc
            except MemoryError as exc:
                raise ModelFileError(
                    path, "too large to read (out of memory)", cause=Cause.OUT_OF_MEMORY
                ) from exc
            except OSError as exc:
                raise _unreadable(path, exc) from exc
            return summary(path, reader)


def _unreadable(path: Path, exc: OSError) -> ModelFileError:
    return ModelFileError(path, f"cannot read ({one_line(exc.strerror)})", cause=Cause.UNREADABLE)


def _regular_file_size(path: Path) -> int:
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise ModelFileError(path, "no such file", cause=Cause.NO_FILE) from exc
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    if stat.S_ISDIR(st.st_mode):
        raise ModelFileError(path, "is a directory, not a GGUF file", cause=Cause.NOT_A_FILE)
    if not stat.S_ISREG(st.st_mode):
        raise ModelFileError(path, "is not a regular file", cause=Cause.NOT_A_FILE)
    if st.st_size == 0:
        raise ModelFileError(path, "is empty, not a GGUF file", cause=Cause.EMPTY)
    return st.st_size


def _check_header(path: Path, size: int) -> None:
    """Magic, version and counts: a bound check, so the reader never starts on an absurd file."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER.size)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    if head[: len(_MAGIC)] != _MAGIC:
        raise ModelFileError(
            path, f"not a GGUF file (bad magic {head[:4]!r})", cause=Cause.BAD_MAGIC
        )
    if len(head) < _HEADER.size:
        raise ModelFileError(
            path,
            f"truncated: the {_HEADER.size}-byte GGUF header ends at byte {size}",
            cause=Cause.TRUNCATED_HEADER,
        )
    _, version, tensors, kvs = _HEADER.unpack(head)
    if version & 0xFFFF == 0:  # written for the other byte order; the reader handles it
        _, version, tensors, kvs = struct.unpack(">4sIQQ", head)
    if version not in READER_SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in READER_SUPPORTED_VERSIONS)
        raise ModelFileError(
            path,
            f"GGUF version {version} is not supported ({supported} are)",
            cause=Cause.UNSUPPORTED_VERSION,
        )
    if _HEADER.size + tensors * _MIN_TENSOR_INFO + kvs * _MIN_KV > size:
        raise ModelFileError(
            path,
            f"truncated or corrupt: declares {tensors} tensors and {kvs} metadata entries, "
            f"more than a file of {size} bytes can hold",
            cause=Cause.BEYOND_FILE,
        )


class _Refused(Exception):
    """A check failed inside the reader: its cause and its line, for ``ModelFileError``."""

    def __init__(self, cause: Cause, problem: str) -> None:
        super().__init__(problem)
        self.cause = cause
        self.problem = problem


class _BoundedReader(GGUFReader):
    """``GGUFReader`` whose every read is bounds-checked and counted (see the module doc)."""

    def __init__(self, path: Path) -> None:
        self._part = "header"
        self._reads = 0
        self._bytes: npt.NDArray[np.uint8] | None = None
        self._tensor_names: set[str] = set()
        try:
            super().__init__(path, mode="r")
        except ValueError as exc:
            if self._part != "alignment":  # the only check the reader makes between steps
                raise
            raise _Refused(
                Cause.BAD_ALIGNMENT,
                f"corrupt: {Keys.General.ALIGNMENT} is not a power of two ({one_line(exc)})",
            ) from exc

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
            raise _Refused(
                Cause.TENSOR_OUTSIDE_FILE if self._part == "tensor data" else Cause.BEYOND_FILE,
                f"truncated or corrupt: {self._part} at byte {start} needs {end - start} bytes, "
                f"but the file ends at byte {size}",
            )
        if end - start > MAX_VALUE_BYTES and self._part != "tensor data":
            raise _Refused(
                Cause.OVER_LIMIT,
                f"corrupt: a {self._part} value at byte {start} declares {end - start} bytes",
            )
        if self._reads > MAX_READS:
            raise _Refused(Cause.OVER_LIMIT, f"corrupt: more than {MAX_READS} metadata values")
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
                raise _Refused(
                    Cause.BEYOND_FILE,
                    f"truncated or corrupt: an array at byte {orig_offs} declares {length} items, "
                    f"more than the {room} bytes after it can hold",
                )
        elif int(raw_type) not in _VALUE_TYPES:
            raise _Refused(Cause.BAD_VALUE_TYPE, f"corrupt: unknown metadata value type {raw_type}")
        return super()._get_field_parts(orig_offs, raw_type)

    def _push_field(self, field: ReaderField, skip_sum: bool = False) -> int:
        try:
            return super()._push_field(field, skip_sum)
        except KeyError as exc:  # the reader's refusal of a key it already holds
            raise _Refused(
                Cause.DUPLICATE, f"corrupt: metadata key {one_line(field.name)!r} appears twice"
            ) from exc

    def _get_tensor_info_field(self, orig_offs: int) -> ReaderField:
        field = super()._get_tensor_info_field(orig_offs)
        raw_type = int(field.parts[4][0])
        if raw_type not in _TENSOR_TYPES:
            raise _Refused(Cause.BAD_TENSOR_TYPE, f"corrupt: unknown tensor type {raw_type}")
        if field.name in self._tensor_names:
            raise _Refused(
                Cause.DUPLICATE, f"corrupt: tensor {one_line(field.name)!r} appears twice"
            )
        self._tensor_names.add(field.name)
        return field

    def _build_fields(self, offs: int, count: int) -> int:
        self._part = "metadata"
        try:
            return super()._build_fields(offs, count)
        except UnicodeDecodeError as exc:  # the reader decodes each key
            raise _Refused(Cause.NOT_UTF8, "corrupt: a metadata key is not valid UTF-8") from exc
        except RecursionError as exc:  # arrays of arrays: the reader recurses per level
            raise _Refused(Cause.NESTED_TOO_DEEP, "corrupt: arrays nested too deeply") from exc

    def _build_tensor_info(self, offs: int, count: int) -> tuple[int, list[ReaderField]]:
        self._part = "tensor info"
        try:
            built = super()._build_tensor_info(offs, count)
        except UnicodeDecodeError as exc:  # the reader decodes each tensor name
            raise _Refused(Cause.NOT_UTF8, "corrupt: a tensor name is not valid UTF-8") from exc
        self._part = "alignment"
        return built

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        self._part = "tensor data"
        try:
            super()._build_tensors(start_offs, fields)
        except FloatingPointError as exc:  # numpy's, under np.errstate(all="raise")
            raise _Refused(Cause.OVERFLOW, "corrupt: a tensor's offset or size overflows") from exc
        except (ValueError, IndexError) as exc:  # types and names were checked as read
            raise _Refused(
                Cause.BAD_TENSOR_SHAPE,
                f"corrupt: a tensor's shape does not fit its type ({one_line(exc)})",
            ) from exc
        # llama.cpp loads a tensor only where the one before it ends, padded to the
        # alignment (gguf_init_from_file); the reader does not check, and tensors that
        # overlap would count the same bytes twice.
        at, alignment = 0, int(self.alignment)
        for tensor in self.tensors:
            offset = int(tensor.data_offset) - int(start_offs)
            if offset != at:
                raise _Refused(
                    Cause.TENSOR_MISPLACED,
                    f"corrupt: tensor {one_line(tensor.name)!r} starts {offset} bytes into the "
                    f"data, not at {at} where the tensor before it ends",
                )
            at += int(tensor.n_bytes) + (-int(tensor.n_bytes) % alignment)


def _min_item_bytes(item_type: int) -> int:
    if item_type == GGUFValueType.STRING:
        return 8  # its length
    if item_type == GGUFValueType.ARRAY:
        return 12  # its item type and length
    scalar = GGUFReader.gguf_scalar_to_np.get(item_type)  # type: ignore[call-overload]
    return 1 if scalar is None else np.dtype(scalar).itemsize
