"""Memory prediction: the peak VRAM a model will take, each term labelled.

Predicted peak = weights + KV cache + compute buffer + output buffer +
runtime footprint + margin, from the model's own architecture values and
artifact size. A measurement of the same (artifact, GPU model, configuration)
overrides the estimate. Every figure carries its source, ``estimated`` or
``measured``, and a prediction never mixes the two.

The terms follow what llama.cpp allocates (see docs/adr/0002-memory-prediction.md):

- KV cache: layers x cells x KV heads x (key + value head size) at the cache
  type's bytes per element; cells are the context padded to a multiple of 256.
- Compute buffer: without flash attention the attention scores and mask,
  cells x micro-batch x (heads + 1) x 4 bytes, plus per-token work buffers of
  about 4 bytes x (vocabulary + 4 x embedding + feed-forward) per micro-batch
  token; with flash attention the scores term shrinks to the mask alone.
- Output buffer: a logits row per sequence for chat; a vector (vocabulary +
  embedding) per micro-batch token for embed and rerank.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from attrs import field, frozen

from nodeau.domain.checks import not_negative, positive
from nodeau.domain.tasks import Task, produces_embeddings

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

KV_CELL_PADDING = 256
F32_BYTES = 4


class Source(str, enum.Enum):
    """Where a figure came from. An estimate is never presented as a measurement."""

    ESTIMATED = "estimated"
    MEASURED = "measured"


class CacheType(str, enum.Enum):
    """KV cache element types llama.cpp accepts for ``--cache-type-k/-v``."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    Q8_0 = "q8_0"
    Q5_1 = "q5_1"
    Q5_0 = "q5_0"
    Q4_1 = "q4_1"
    Q4_0 = "q4_0"
    IQ4_NL = "iq4_nl"


# (elements per block, bytes per block), as ggml lays the types out
_BLOCKS: dict[CacheType, tuple[int, int]] = {
    CacheType.F32: (1, 4),
    CacheType.F16: (1, 2),
    CacheType.BF16: (1, 2),
    CacheType.Q8_0: (32, 34),
    CacheType.Q5_1: (32, 24),
    CacheType.Q5_0: (32, 22),
    CacheType.Q4_1: (32, 20),
    CacheType.Q4_0: (32, 18),
    CacheType.IQ4_NL: (32, 18),
}


@frozen(kw_only=True)
class Architecture:
    """The architecture values a GGUF file declares that memory depends on."""

    name: str
    n_layers: int = field(validator=positive)
    n_embd: int = field(validator=positive)
    n_head: int = field(validator=positive)
    n_head_kv: int = field(validator=positive)
    key_length: int = field(validator=positive)
    value_length: int = field(validator=positive)
    n_vocab: int = field(validator=positive)
    n_ff: int = field(validator=not_negative, default=0)
    context_length: int = field(validator=positive)

    def __attrs_post_init__(self) -> None:
        if self.n_head_kv > self.n_head:
            raise ValueError(f"{self.n_head_kv} KV heads is more than {self.n_head} heads")


@frozen(kw_only=True)
class RuntimeConfig:
    """The configuration the runtime really runs with (not merely the one requested)."""

    context_tokens: int = field(validator=positive)
    parallel: int = field(validator=positive, default=1)
    batch: int = field(validator=positive, default=512)
    ubatch: int = field(validator=positive, default=512)
    cache_type_k: CacheType = CacheType.F16
    cache_type_v: CacheType = CacheType.F16
    flash_attention: bool = False
    task: Task = Task.CHAT

    def key(self) -> str:
        """A canonical text naming this configuration, the key of a measurement."""
        return (
            f"task={self.task.value},ctx={self.context_tokens},parallel={self.parallel},"
            f"batch={self.batch},ubatch={self.ubatch},k={self.cache_type_k.value},"
            f"v={self.cache_type_v.value},fa={'on' if self.flash_attention else 'off'}"
        )


@frozen(kw_only=True)
class Allowances:
    """What is added on top of the model's own terms: the runtime and a safety margin."""

    runtime_footprint_bytes: int = field(validator=not_negative, default=512 * MIB)
    margin_percent: int = field(validator=not_negative, default=10)
    margin_floor_bytes: int = field(validator=not_negative, default=256 * MIB)


@frozen(kw_only=True)
class Term:
    """One line of the arithmetic: a name, a figure in bytes, where it came from, and how."""

    name: str
    bytes: int = field(validator=not_negative)
    source: Source
    basis: str


@frozen(kw_only=True)
class Prediction:
    """A predicted peak: its terms, all of one source."""

    terms: tuple[Term, ...]
    source: Source

    def __attrs_post_init__(self) -> None:
        check_single_source(self.terms, self.source)

    @property
    def total_bytes(self) -> int:
        return sum(t.bytes for t in self.terms)


def check_single_source(terms: Iterable[Term], source: Source) -> None:
    """Refuse to build a prediction that mixes estimated and measured figures."""
    terms = tuple(terms)
    if not terms:
        raise ValueError("a prediction needs at least one term")
    mixed = [t.name for t in terms if t.source is not source]
    if mixed:
        raise ValueError(f"terms {mixed} are not {source.value}: a prediction never mixes sources")


def kv_cells(config: RuntimeConfig) -> int:
    """KV cache cells: the context rounded up to a multiple of 256 (llama.cpp's padding)."""
    cells = -(-config.context_tokens // KV_CELL_PADDING) * KV_CELL_PADDING
    return max(cells, KV_CELL_PADDING)


def row_bytes(elements: int, cache_type: CacheType) -> int:
    """Bytes of one row of ``elements`` values of a cache type (quantised types come in blocks)."""
    per_block, block_bytes = _BLOCKS[cache_type]
    return -(-elements // per_block) * block_bytes


def kv_cache_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """Layers x cells x (K row + V row), rows being KV heads x head size."""
    k_row = row_bytes(arch.n_head_kv * arch.key_length, config.cache_type_k)
    v_row = row_bytes(arch.n_head_kv * arch.value_length, config.cache_type_v)
    return arch.n_layers * kv_cells(config) * (k_row + v_row)


def effective_ubatch(config: RuntimeConfig) -> int:
    """The micro-batch the runtime really uses: never more than the batch or the cache."""
    return min(config.ubatch, config.batch, kv_cells(config))


def compute_buffer_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """Attention scratch (scores and mask; the mask alone with flash attention) plus work."""
    ubatch = effective_ubatch(config)
    per_cell = F32_BYTES if config.flash_attention else (arch.n_head + 1) * F32_BYTES
    attention = kv_cells(config) * ubatch * per_cell
    work = ubatch * F32_BYTES * (arch.n_vocab + 4 * arch.n_embd + arch.n_ff)
    return attention + work


def output_buffer_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """A logits row per sequence for chat; a vocabulary + embedding vector per token otherwise."""
    if produces_embeddings(config.task):
        return effective_ubatch(config) * F32_BYTES * (arch.n_vocab + arch.n_embd)
    return config.parallel * F32_BYTES * arch.n_vocab


def margin_bytes(subtotal: int, allowances: Allowances) -> int:
    """The safety margin: a percentage of everything else, never below the floor."""
    share = -(-subtotal * allowances.margin_percent // 100)
    return max(share, allowances.margin_floor_bytes)


def estimate_peak(
    arch: Architecture, artifact_bytes: int, config: RuntimeConfig, allowances: Allowances
) -> Prediction:
    """The estimated peak VRAM of serving this artifact in this configuration."""
    if artifact_bytes <= 0:
        raise ValueError(f"artifact size must be positive, got {artifact_bytes}")
    est = Source.ESTIMATED
    terms = [
        Term(name="weights", bytes=artifact_bytes, source=est, basis="artifact size"),
        Term(
            name="kv cache",
            bytes=kv_cache_bytes(arch, config),
            source=est,
            basis=(
                f"{arch.n_layers} layers x {kv_cells(config)} cells x {arch.n_head_kv} KV heads"
                f" x ({arch.key_length} {config.cache_type_k.value}"
                f" + {arch.value_length} {config.cache_type_v.value})"
            ),
        ),
        Term(
            name="compute buffer",
            bytes=compute_buffer_bytes(arch, config),
            source=est,
            basis=(
                f"micro-batch {effective_ubatch(config)}, flash attention "
                f"{'on' if config.flash_attention else 'off'}"
            ),
        ),
        Term(
            name="output buffer",
            bytes=output_buffer_bytes(arch, config),
            source=est,
            basis=f"task {config.task.value}, vocabulary {arch.n_vocab}",
        ),
        Term(
            name="runtime footprint",
            bytes=allowances.runtime_footprint_bytes,
            source=est,
            basis="runtime allowance",
        ),
    ]
    subtotal = sum(t.bytes for t in terms)
    terms.append(
        Term(
            name="margin",
            bytes=margin_bytes(subtotal, allowances),
            source=est,
            basis=(
                f"{allowances.margin_percent}% of the rest, at least "
                f"{allowances.margin_floor_bytes // MIB} MiB"
            ),
        )
    )
    return Prediction(terms=tuple(terms), source=est)


@frozen(kw_only=True)
class MeasuredKey:
    """What a measurement is of: these bytes, on this GPU model, in this configuration."""

    artifact_id: str
    gpu_model: str
    config_key: str


@frozen(kw_only=True)
class Measurement:
    """A peak observed on a real card (NVML), with a note of how it was taken."""

    key: MeasuredKey
    peak_bytes: int = field(validator=positive)
    note: str = ""


@frozen(kw_only=True)
class MeasuredTable:
    """Measured peaks; the newest measurement of a key is the one that counts."""

    measurements: tuple[Measurement, ...] = ()

    def lookup(self, key: MeasuredKey) -> Measurement | None:
        found = [m for m in self.measurements if m.key == key]
        return found[-1] if found else None

    def configurations_of(self, artifact_id: str) -> tuple[MeasuredKey, ...]:
        """Every configuration measured for an artifact; an empty tuple is a real answer."""
        seen: dict[MeasuredKey, None] = {}
        for m in self.measurements:
            if m.key.artifact_id == artifact_id:
                seen[m.key] = None
        return tuple(seen)


def predict_peak(
    *,
    arch: Architecture,
    artifact_id: str,
    artifact_bytes: int,
    config: RuntimeConfig,
    gpu_model: str,
    table: MeasuredTable,
    allowances: Allowances,
) -> Prediction:
    """The measurement of this (artifact, GPU model, configuration) if any, else the estimate."""
    key = MeasuredKey(artifact_id=artifact_id, gpu_model=gpu_model, config_key=config.key())
    measured = table.lookup(key)
    if measured is None:
        return estimate_peak(arch, artifact_bytes, config, allowances)
    term = Term(
        name="measured peak",
        bytes=measured.peak_bytes,
        source=Source.MEASURED,
        basis=f"measured on {gpu_model}" + (f" ({measured.note})" if measured.note else ""),
    )
    return Prediction(terms=(term,), source=Source.MEASURED)


def predictor(
    *,
    arch: Architecture,
    artifact_id: str,
    artifact_bytes: int,
    config: RuntimeConfig,
    table: MeasuredTable,
    allowances: Allowances,
) -> Callable[[str], Prediction]:
    """The predicted peak of this artifact in this configuration, per GPU model: measured
    where the table has it, estimated otherwise (``predict_peak``)."""

    def predict(gpu_model: str) -> Prediction:
        return predict_peak(
            arch=arch,
            artifact_id=artifact_id,
            artifact_bytes=artifact_bytes,
            config=config,
            gpu_model=gpu_model,
            table=table,
            allowances=allowances,
        )

    return predict
