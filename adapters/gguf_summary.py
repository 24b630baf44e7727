"""What a GGUF file's metadata says, as the domain's ``ModelSummary``.

Why it is so: docs/adr/decisions/adapters.md (gguf_summary.py).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from gguf import GGUFReader, GGUFValueType, Keys, LlamaFileType
from gguf.gguf_reader import ReaderField, ReaderTensor

from nodeau.domain.card_split import LayerWeights
from nodeau.domain.memory import Architecture
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.models import ModelFileCause as Cause
from nodeau.ports.models import ModelFileError

MAX_LAYERS = 10_000
MAX_EMBD = 1 << 20
MAX_HEAD_LENGTH = 1 << 16
MAX_FF = 1 << 22
MAX_VOCAB = 1 << 24
MAX_CONTEXT = 1 << 28
MAX_EXPERTS = 1 << 16

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
_TOKEN_EMBD = "token_embd.weight"
_MESSAGE_LIMIT = 160

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


def one_line(text: object) -> str:
    """Printable, one line and short: reader messages may quote bytes from the file."""
    clean = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))
    return clean if len(clean) <= _MESSAGE_LIMIT else clean[: _MESSAGE_LIMIT - 3] + "..."


class _Fields:
    """Typed access to the metadata: a wrong type or value is a ModelFileError naming the key."""

    def __init__(self, path: Path, reader: GGUFReader) -> None:
        self._path = path
        self._fields = reader.fields

    def error(self, key: str, problem: str, cause: Cause = Cause.BAD_VALUE) -> ModelFileError:
        return ModelFileError(self._path, f"key {key} {problem}", cause=cause)

    def has(self, key: str) -> bool:
        return key in self._fields

    def _field(self, key: str) -> ReaderField:
        field = self._fields.get(key)
        if field is None:
            raise ModelFileError(self._path, f"missing key {key}", cause=Cause.MISSING_KEY)
        return field

    def _type_error(self, key: str, field: ReaderField, expected: str) -> ModelFileError:
        found = "/".join(t.name.lower() for t in field.types) or "unknown"
        return self.error(key, f"has type {found}, expected {expected}", Cause.WRONG_TYPE)

    def any_text(self, key: str) -> str:
        """A string value, newlines and all (a chat template)."""
        field = self._field(key)
        if field.types != [GGUFValueType.STRING]:
            raise self._type_error(key, field, "a string")
        try:
            return bytes(field.parts[field.data[0]]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(key, "is not valid UTF-8 text", Cause.NOT_UTF8) from exc

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
            raise self.error(key, "is an empty array, expected an integer", Cause.WRONG_TYPE)
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


def summary(path: Path, reader: GGUFReader) -> ModelSummary:
    kv = _Fields(path, reader)
    arch = kv.text(Keys.General.ARCHITECTURE)
    if not _ARCH_NAME.fullmatch(arch):
        raise kv.error(
            Keys.General.ARCHITECTURE, f"is {one_line(arch)!r}, not an architecture name"
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
        raise ModelFileError(
            path,
            "holds no tensors (a vocabulary-only file is not a model)",
            cause=Cause.NO_TENSORS,
        )
    has_tokenizer = kv.has(Keys.Tokenizer.LIST)
    n_vocab = _vocab_size(path, kv, arch, reader)
    if not 1 <= n_vocab <= MAX_VOCAB:
        raise ModelFileError(
            path,
            f"vocabulary of {n_vocab} tokens, expected 1 to {MAX_VOCAB}",
            cause=Cause.BAD_VALUE,
        )
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
        layers=_layer_weights(tensors, n_layers, tied=arch not in _ENCODERS),
    )


_LAYER = re.compile(r"blk\.(\d+)\.")
_INPUT = ("token_embd.", "token_types.", "position_embd.", "token_embd_norm.")


def _layer_weights(tensors: list[ReaderTensor], n_layers: int, *, tied: bool) -> LayerWeights:
    """Each tensor's bytes by where llama.cpp's layer split puts it: ``blk.N.`` in layer N,
    the embeddings in the input layer, the rest (output, its norm) in the output layer, which
    also takes a copy of the token embeddings when the file has no ``output.weight``."""
    layers = [0] * n_layers
    into = output = 0
    for tensor in tensors:
        size = int(tensor.n_bytes)
        if (block := _LAYER.match(tensor.name)) and int(block[1]) < n_layers:
            layers[int(block[1])] += size
        elif tensor.name.startswith(_INPUT):
            into += size
        else:
            output += size
    if tied and all(t.name != "output.weight" for t in tensors):
        output += sum(int(t.n_bytes) for t in tensors if t.name == "token_embd.weight")
    return LayerWeights(input_bytes=into, layer_bytes=tuple(layers), output_bytes=output)


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
        cause=Cause.NO_VOCABULARY,
    )


def _file_type(kv: _Fields) -> str | None:
    if not kv.has(Keys.General.FILE_TYPE):
        return None
    value = kv.integer(Keys.General.FILE_TYPE, 0, 0xFFFF_FFFF)
    try:
        return LlamaFileType(value).name
    except ValueError:
        return f"unknown ({value})"
