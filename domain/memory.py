"""Memory prediction: the peak VRAM a model will take, each term labelled.

Why it is so: docs/adr/decisions/domain.md (memory.py).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable

from attrs import field, frozen

from nodeau.domain.allowances import Allowances
from nodeau.domain.checks import not_negative, positive
from nodeau.domain.tasks import Task, produces_embeddings
from nodeau.domain.units import GIB as GIB  # noqa: PLC0414  (given here too)
from nodeau.domain.units import KIB as KIB  # noqa: PLC0414
from nodeau.domain.units import MIB as MIB  # noqa: PLC0414

KV_CELL_PADDING = 256
MASK_ROW_PADDING = 64  # llama.cpp pads the mask's rows (micro-batch tokens) to this
F32_BYTES = 4
F16_BYTES = 2
# Per micro-batch token, what each phase keeps next to its own tensors (f32 rows):
# attention: 3 activation rows of the embedding, 3 of the queries, a K and a V row;
# feed-forward: 3 rows of its (routed) width and 5 of the embedding; a little slack.
ATTENTION_EMBD_ROWS = 3
ATTENTION_Q_ROWS = 3
FFN_ROWS = 3
FFN_EMBD_ROWS = 5
SLACK_FLOATS = 16


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
QUANTISED_CACHE = frozenset(t for t, (per_block, _) in _BLOCKS.items() if per_block > 1)


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
    # Sliding-window attention: ``swa_layers`` of the layers attend to (and cache)
    # only the last ``sliding_window`` tokens; 0 and 0 for a model without it.
    sliding_window: int = field(validator=not_negative, default=0)
    swa_layers: int = field(validator=not_negative, default=0)
    # Whether llama.cpp keeps a KV cache at all: encoder-only models (BERT and its
    # kin) attend within the micro-batch and keep none.
    kv_cache: bool = True
    # Whether the graph ends in a language-model head (logits): encoder-only embedding
    # models end in their embeddings.
    lm_head: bool = True
    # A mixture of experts: ``n_expert_used`` of ``n_expert`` feed-forwards per token.
    n_expert: int = field(validator=not_negative, default=0)
    n_expert_used: int = field(validator=not_negative, default=0)

    def __attrs_post_init__(self) -> None:
        if self.n_head_kv > self.n_head:
            raise ValueError(f"{self.n_head_kv} KV heads is more than {self.n_head} heads")
        if self.swa_layers > self.n_layers:
            raise ValueError(f"{self.swa_layers} sliding-window layers of {self.n_layers}")
        if self.swa_layers and not self.sliding_window:
            raise ValueError(f"{self.swa_layers} sliding-window layers without a window")
        if self.n_expert_used > self.n_expert:
            raise ValueError(f"{self.n_expert_used} experts used of {self.n_expert}")

    @property
    def full_layers(self) -> int:
        """Layers that attend to (and cache) the whole context."""
        return self.n_layers - self.swa_layers


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
    total_bytes: int = field(init=False, eq=False)  # the terms' sum (read once per card)

    def __attrs_post_init__(self) -> None:
        check_single_source(self.terms, self.source)
        object.__setattr__(self, "total_bytes", sum(t.bytes for t in self.terms))


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


def swa_cells(arch: Architecture, config: RuntimeConfig) -> int:
    """Cells a sliding-window layer keeps: window x sequences + micro-batch, padded to 256,
    never more than the full cache (llama.cpp's ``llama_kv_cache_iswa``, unified cache)."""
    wanted = arch.sliding_window * config.parallel + effective_ubatch(config)
    padded = -(-wanted // KV_CELL_PADDING) * KV_CELL_PADDING
    return min(kv_cells(config), padded)


def kv_cache_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """Per layer, cells x (K row + V row), rows being KV heads x head size; full layers
    keep every cell, sliding-window layers a window's worth, encoder-only models none."""
    if not arch.kv_cache:
        return 0
    k_row = row_bytes(arch.n_head_kv * arch.key_length, config.cache_type_k)
    v_row = row_bytes(arch.n_head_kv * arch.value_length, config.cache_type_v)
    cells = arch.full_layers * kv_cells(config) + arch.swa_layers * swa_cells(arch, config)
    return cells * (k_row + v_row)


def effective_ubatch(config: RuntimeConfig) -> int:
    """The micro-batch the runtime really uses: never more than the batch or the cache."""
    return min(config.ubatch, config.batch, kv_cells(config))


def attended_cells(arch: Architecture, config: RuntimeConfig) -> tuple[int, ...]:
    """The key counts of each kind of attention (one attention mask each): the whole cache
    for full layers, a window's cells for sliding-window ones, the micro-batch itself for
    an encoder-only model."""
    if not arch.kv_cache:
        return (effective_ubatch(config),)
    kinds = []
    if arch.full_layers:
        kinds.append(kv_cells(config))
    if arch.swa_layers:
        kinds.append(swa_cells(arch, config))
    return tuple(kinds)


def mask_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """The attention masks: keys x padded micro-batch, f16 with flash attention, else f32."""
    rows = -(-effective_ubatch(config) // MASK_ROW_PADDING) * MASK_ROW_PADDING
    element = F16_BYTES if config.flash_attention else F32_BYTES
    return sum(cells * rows * element for cells in attended_cells(arch, config))


def graph_outputs(config: RuntimeConfig) -> int:
    """Rows the graph computes logits for at reservation: one per sequence for chat, every
    micro-batch token when serving embeddings (llama-server's output limits)."""
    if produces_embeddings(config.task):
        return effective_ubatch(config)
    return config.parallel


def converted_cache_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """Flash attention over a quantised cache on a card first converts the attended keys
    and values to f16 (llama.cpp's CUDA kernels): those copies, for the widest attention;
    none without flash attention or with an unquantised cache."""
    if not config.flash_attention or not arch.kv_cache:
        return 0
    cells = max(attended_cells(arch, config))
    widths = (
        (config.cache_type_k, arch.key_length),
        (config.cache_type_v, arch.value_length),
    )
    return sum(
        cells * arch.n_head_kv * width * F16_BYTES
        for cache_type, width in widths
        if cache_type in QUANTISED_CACHE
    )


def compute_buffer_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """The largest phase of the graph per micro-batch token (attention, with its scores
    unless flash attention is on; or the feed-forward), plus the masks, the logits and a
    quantised cache's f16 copies for flash attention."""
    ubatch = effective_ubatch(config)
    q_width = arch.n_head * arch.key_length
    kv_width = arch.n_head_kv * (arch.key_length + arch.value_length)
    scores = 0 if config.flash_attention else max(attended_cells(arch, config)) * arch.n_head
    attention = scores + ATTENTION_EMBD_ROWS * arch.n_embd + ATTENTION_Q_ROWS * q_width + kv_width
    ff_width = arch.n_ff * max(1, arch.n_expert_used) + arch.n_expert
    feed_forward = FFN_ROWS * ff_width + FFN_EMBD_ROWS * arch.n_embd
    per_token = max(attention, feed_forward) + SLACK_FLOATS
    logits = graph_outputs(config) * arch.n_vocab * F32_BYTES if arch.lm_head else 0
    converted = converted_cache_bytes(arch, config)
    return ubatch * per_token * F32_BYTES + mask_bytes(arch, config) + logits + converted


def output_buffer_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """A logits row per sequence, plus an embedding row per sequence when serving
    embeddings: what llama.cpp reserves at load (``output_reserve``)."""
    width = arch.n_vocab + (arch.n_embd if produces_embeddings(config.task) else 0)
    return config.parallel * F32_BYTES * width


def margin_bytes(subtotal: int, allowances: Allowances) -> int:
    """The safety margin: a percentage of everything else, never below the floor."""
    share = -(-subtotal * allowances.margin_percent // 100)
    return max(share, allowances.margin_floor_bytes)


@functools.lru_cache(maxsize=1024)
def estimate_peak(
    arch: Architecture, artifact_bytes: int, config: RuntimeConfig, allowances: Allowances
) -> Prediction:
    """The estimated peak VRAM of serving this artifact in this configuration (a pure
    function of frozen values: worked out once for the many decisions of one pass)."""
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
                + (
                    ", the quantised cache's f16 copies"
                    if converted_cache_bytes(arch, config)
                    else ""
                )
            ),
        ),
        Term(
            name="output buffer",
            bytes=output_buffer_bytes(arch, config),
            source=est,
            basis=f"task {config.task.value}, vocabulary {arch.n_vocab}",
        ),
    ]
    return with_allowances(terms, allowances, "runtime allowance")


def with_allowances(terms: list[Term], allowances: Allowances, runtime_basis: str) -> Prediction:
    """An estimate of ``terms`` with the runtime allowance and, last, the margin on them all."""
    est = Source.ESTIMATED
    runtime = allowances.runtime_footprint_bytes
    terms = [*terms, Term(name="runtime footprint", bytes=runtime, source=est, basis=runtime_basis)]
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
    where the table has it, estimated otherwise (``predict_peak``). Each GPU model's figure
    is worked out once: every input is a frozen value."""
    known: dict[str, Prediction] = {}

    def predict(gpu_model: str) -> Prediction:
        found = known.get(gpu_model)
        if found is None:
            found = known[gpu_model] = predict_peak(
                arch=arch,
                artifact_id=artifact_id,
                artifact_bytes=artifact_bytes,
                config=config,
                gpu_model=gpu_model,
                table=table,
                allowances=allowances,
            )
        return found

    return predict
