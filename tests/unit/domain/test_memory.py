"""Memory prediction: each term's arithmetic, labels, and the measured override."""

from __future__ import annotations

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.allowances import Allowances
from nodeau.domain.memory import (
    GIB,
    MIB,
    Architecture,
    CacheType,
    MeasuredKey,
    MeasuredTable,
    Measurement,
    Prediction,
    RuntimeConfig,
    Source,
    Term,
    compute_buffer_bytes,
    converted_cache_bytes,
    effective_ubatch,
    estimate_peak,
    kv_cache_bytes,
    kv_cells,
    margin_bytes,
    mask_bytes,
    output_buffer_bytes,
    predict_peak,
    row_bytes,
    swa_cells,
)
from nodeau.domain.model_info import runtime_config
from nodeau.domain.tasks import Task
from tests.support.builders.architectures import TINY
from tests.support.builders.summaries import SUMMARY

# An 8B-class llama: 32 layers, 4096 wide, 32 heads, 8 KV heads, head size 128.
LLAMA_8B = Architecture(
    name="llama",
    n_layers=32,
    n_embd=4096,
    n_head=32,
    n_head_kv=8,
    key_length=128,
    value_length=128,
    n_vocab=128256,
    n_ff=14336,
    context_length=131072,
)


def config(**kw: object) -> RuntimeConfig:
    return RuntimeConfig(**{"context_tokens": 4096, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("context", "cells"),
    [(1, 256), (128, 256), (256, 256), (257, 512), (1000, 1024), (4096, 4096), (4097, 4352)],
)
def test_kv_cells_pad_to_256(context: int, cells: int) -> None:
    assert kv_cells(config(context_tokens=context)) == cells


@pytest.mark.parametrize(
    ("elements", "cache_type", "expected"),
    [
        (64, CacheType.F32, 256),
        (64, CacheType.F16, 128),
        (64, CacheType.BF16, 128),
        (64, CacheType.Q8_0, 68),
        (64, CacheType.Q4_0, 36),
        (64, CacheType.Q4_1, 40),
        (64, CacheType.Q5_0, 44),
        (64, CacheType.Q5_1, 48),
        (64, CacheType.IQ4_NL, 36),
        (33, CacheType.Q8_0, 68),  # a partial block still takes a whole block
        (1, CacheType.F16, 2),
    ],
)
def test_row_bytes_by_cache_type(elements: int, cache_type: CacheType, expected: int) -> None:
    assert row_bytes(elements, cache_type) == expected


@pytest.mark.parametrize(
    ("context", "mib"),
    # llama.cpp's own reports for this model at load (NOTES-llamacpp.md): 0.12 / 0.50 / 2.00 MiB
    [(256, 0.125), (1024, 0.5), (4096, 2.0)],
)
def test_kv_cache_matches_llama_cpp_report_for_tiny_model(context: int, mib: float) -> None:
    assert kv_cache_bytes(TINY, config(context_tokens=context)) == int(mib * MIB)


def test_kv_cache_of_8b_model_at_8k_f16_is_one_gib() -> None:
    # 32 layers x 8192 cells x 8 KV heads x (128 + 128) x 2 bytes
    assert kv_cache_bytes(LLAMA_8B, config(context_tokens=8192)) == 32 * 8192 * 8 * 256 * 2
    assert kv_cache_bytes(LLAMA_8B, config(context_tokens=8192)) == GIB


def test_quantised_kv_cache_is_smaller_and_mixed_types_add_up() -> None:
    f16 = kv_cache_bytes(LLAMA_8B, config(context_tokens=8192))
    q8 = kv_cache_bytes(
        LLAMA_8B,
        config(context_tokens=8192, cache_type_k=CacheType.Q8_0, cache_type_v=CacheType.Q8_0),
    )
    mixed = kv_cache_bytes(
        LLAMA_8B,
        config(context_tokens=8192, cache_type_k=CacheType.Q8_0, cache_type_v=CacheType.F16),
    )
    assert q8 == 32 * 8192 * 2 * (1024 // 32 * 34)
    assert mixed == (f16 + q8) // 2


# Gemma 3 270M: 18 layers, 15 of them keeping a 512-token window; one KV head of 256.
GEMMA3_270M = Architecture(
    name="gemma3",
    n_layers=18,
    n_embd=640,
    n_head=4,
    n_head_kv=1,
    key_length=256,
    value_length=256,
    n_vocab=262144,
    n_ff=2048,
    context_length=32768,
    sliding_window=512,
    swa_layers=15,
)

# all-MiniLM-L6-v2: an encoder-only embedding model (no KV cache, no logits).
MINILM = Architecture(
    name="bert",
    n_layers=6,
    n_embd=384,
    n_head=12,
    n_head_kv=12,
    key_length=32,
    value_length=32,
    n_vocab=30522,
    n_ff=1536,
    context_length=512,
    kv_cache=False,
    lm_head=False,
)


@pytest.mark.parametrize(
    ("arch", "context", "flash", "measured_mib"),
    # compute buffers llama-server reported (CPU, batch 512, tests/integration/
    # test_memory_prediction.py); the estimate covers each, within 10%
    [
        (TINY, 256, False, 1.69),
        (TINY, 1024, False, 10.88),
        (TINY, 4096, False, 40.88),
        (TINY, 16384, False, 160.88),
        (TINY, 4096, True, 5.01),
        (GEMMA3_270M, 512, False, 19.76),
        (GEMMA3_270M, 1024, False, 21.76),
        (GEMMA3_270M, 4096, False, 51.76),
        (GEMMA3_270M, 16384, False, 171.76),
        (GEMMA3_270M, 4096, True, 22.77),
    ],
)
def test_compute_buffer_estimate_covers_llama_server_report(
    arch: Architecture, context: int, flash: bool, measured_mib: float
) -> None:
    estimate = compute_buffer_bytes(arch, config(context_tokens=context, flash_attention=flash))
    assert estimate >= measured_mib * MIB
    assert estimate <= 1.10 * measured_mib * MIB


@pytest.mark.parametrize(("context", "measured_mib"), [(256, 5.50), (512, 17.51)])
def test_compute_buffer_of_an_encoder_attends_within_the_micro_batch(
    context: int, measured_mib: float
) -> None:
    embed = config(context_tokens=context, task=Task.EMBED)
    estimate = compute_buffer_bytes(MINILM, embed)
    assert measured_mib * MIB <= estimate <= 1.25 * measured_mib * MIB
    assert mask_bytes(MINILM, embed) == context * context * 4


def test_compute_buffer_exact_terms() -> None:
    # attention phase per token: 1024 cells x 4 heads + 3 x 64 + 3 x 64 + (64 + 64) + 16 slack,
    # plus the f32 mask (1024 x 512) and one logits row
    c = config(context_tokens=1024)
    attention = 1024 * 4 + 3 * 64 + 3 * 64 + 128 + 16
    assert compute_buffer_bytes(TINY, c) == 512 * 4 * attention + 1024 * 512 * 4 + 355 * 4
    # with flash attention no scores: the feed-forward phase (3 x 128 + 5 x 64) is larger
    fa = config(context_tokens=1024, flash_attention=True)
    ffn = 3 * 128 + 5 * 64 + 16
    assert compute_buffer_bytes(TINY, fa) == 512 * 4 * ffn + 1024 * 512 * 2 + 355 * 4


def test_compute_buffer_of_experts_counts_the_routed_width() -> None:
    moe = Architecture(
        name="llama",
        n_layers=2,
        n_embd=64,
        n_head=4,
        n_head_kv=4,
        key_length=16,
        value_length=16,
        n_vocab=355,
        n_ff=1024,
        context_length=256,
        n_expert=8,
        n_expert_used=2,
    )
    c = config(context_tokens=256, flash_attention=True)
    per_token = 3 * (2 * 1024 + 8) + 5 * 64 + 16
    assert compute_buffer_bytes(moe, c) == 256 * 4 * per_token + 256 * 256 * 2 + 355 * 4


def test_serving_embeddings_computes_logits_for_every_token_unless_encoder_only() -> None:
    chat = compute_buffer_bytes(TINY, config(context_tokens=512))
    embed = compute_buffer_bytes(TINY, config(context_tokens=512, task=Task.EMBED))
    assert embed - chat == (512 - 1) * 355 * 4
    no_head = compute_buffer_bytes(MINILM, config(context_tokens=512, task=Task.EMBED))
    assert no_head == compute_buffer_bytes(MINILM, config(context_tokens=512))


@pytest.mark.parametrize(
    ("context", "parallel", "swa", "kv_mib"),
    # llama-server's reports for Gemma 3 270M: 3 full layers + 15 window layers
    [(256, 1, 256, 4.50), (512, 1, 512, 9.00), (4096, 1, 1024, 27.00), (16384, 1, 1024, 63.00)],
)
def test_sliding_window_layers_keep_a_window_of_cells(
    context: int, parallel: int, swa: int, kv_mib: float
) -> None:
    c = config(context_tokens=context, parallel=parallel)
    assert swa_cells(GEMMA3_270M, c) == swa
    assert kv_cache_bytes(GEMMA3_270M, c) == int(kv_mib * MIB)


def test_the_window_grows_with_sequences_and_never_passes_the_context() -> None:
    assert swa_cells(GEMMA3_270M, config(context_tokens=16384, parallel=4)) == 2560
    assert swa_cells(GEMMA3_270M, config(context_tokens=1024, parallel=4)) == 1024


def test_an_encoder_only_model_keeps_no_kv_cache() -> None:
    assert kv_cache_bytes(MINILM, config(context_tokens=512, task=Task.EMBED)) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"swa_layers": 3},  # without a window
        {"swa_layers": 3, "sliding_window": 512, "n_layers": 2},
        {"n_expert": 2, "n_expert_used": 4},
    ],
)
def test_architecture_rejects_impossible_windows_and_experts(bad: dict[str, int]) -> None:
    values = {
        "name": "llama",
        "n_layers": 4,
        "n_embd": 64,
        "n_head": 4,
        "n_head_kv": 4,
        "key_length": 16,
        "value_length": 16,
        "n_vocab": 100,
        "context_length": 256,
        **bad,
    }
    with pytest.raises(ValueError):
        Architecture(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("context", "batch", "ubatch", "expected"),
    [(4096, 512, 512, 512), (256, 512, 512, 256), (4096, 256, 512, 256), (4096, 2048, 128, 128)],
)
def test_effective_ubatch(context: int, batch: int, ubatch: int, expected: int) -> None:
    assert effective_ubatch(config(context_tokens=context, batch=batch, ubatch=ubatch)) == expected


def test_output_buffer_by_task() -> None:
    # llama-server reserved 0.12 MiB for MiniLM serving embeddings and 0.19 MiB for
    # SmolLM2's 49152-token vocabulary in chat: a row per sequence
    embed = output_buffer_bytes(MINILM, config(context_tokens=256, task=Task.EMBED))
    assert embed == 4 * (30522 + 384)
    assert round(embed / MIB, 2) == 0.12
    assert output_buffer_bytes(MINILM, config(context_tokens=256, task=Task.RERANK)) == embed
    chat = output_buffer_bytes(LLAMA_8B, config(parallel=4))
    assert chat == 4 * 4 * 128256


@pytest.mark.parametrize(
    ("subtotal", "percent", "floor", "expected"),
    [
        (10 * GIB, 10, 256 * MIB, GIB),
        (GIB, 10, 256 * MIB, 256 * MIB),
        (1000, 10, 0, 100),
        (1001, 10, 0, 101),  # rounds up, never down
        (0, 10, 0, 0),
    ],
)
def test_margin(subtotal: int, percent: int, floor: int, expected: int) -> None:
    allow = Allowances(margin_percent=percent, margin_floor_bytes=floor)
    assert margin_bytes(subtotal, allow) == expected


def test_estimate_lists_every_term_labelled_estimated() -> None:
    allow = Allowances(runtime_footprint_bytes=500 * MIB, margin_percent=10, margin_floor_bytes=0)
    c = config(context_tokens=8192)
    p = estimate_peak(LLAMA_8B, 4_920_000_000, c, allow)
    assert [t.name for t in p.terms] == [
        "weights",
        "kv cache",
        "compute buffer",
        "output buffer",
        "runtime footprint",
        "margin",
    ]
    assert p.source is Source.ESTIMATED
    assert {t.source for t in p.terms} == {Source.ESTIMATED}
    by_name = {t.name: t.bytes for t in p.terms}
    assert by_name["weights"] == 4_920_000_000
    assert by_name["kv cache"] == GIB
    assert by_name["compute buffer"] == compute_buffer_bytes(LLAMA_8B, c)
    assert by_name["output buffer"] == 4 * 128256
    assert by_name["runtime footprint"] == 500 * MIB
    rest = sum(b for n, b in by_name.items() if n != "margin")
    assert by_name["margin"] == -(-rest // 10)
    assert p.total_bytes == rest + by_name["margin"]
    assert [t.basis for t in p.terms] == [
        "artifact size",
        "32 layers x 8192 cells x 8 KV heads x (128 f16 + 128 f16)",
        "micro-batch 512, flash attention off",
        "task chat, vocabulary 128256",
        "runtime allowance",
        "10% of the rest, at least 0 MiB",
    ]
    fa = estimate_peak(
        LLAMA_8B,
        4_920_000_000,
        config(context_tokens=8192, flash_attention=True, task=Task.EMBED),
        Allowances(margin_floor_bytes=300 * MIB + 1),
    )
    assert fa.terms[2].basis == "micro-batch 512, flash attention on"
    assert fa.terms[3].basis == "task embed, vocabulary 128256"
    assert fa.terms[5].basis == "10% of the rest, at least 300 MiB"
    q8 = config(
        context_tokens=8192, flash_attention=True, cache_type_k=CacheType.Q8_0,
        cache_type_v=CacheType.Q8_0,
    )  # fmt: skip
    said = estimate_peak(LLAMA_8B, 4_920_000_000, q8, Allowances()).terms[2].basis
    assert said == "micro-batch 512, flash attention on, the quantised cache's f16 copies"


def test_estimate_refuses_empty_artifact() -> None:
    with pytest.raises(ValueError, match="artifact size"):
        estimate_peak(TINY, 0, config(), Allowances())


KEY_CONFIG = config(context_tokens=8192)


def measured_table(peak: int) -> MeasuredTable:
    key = MeasuredKey(artifact_id="a" * 64, gpu_model="NVIDIA H200", config_key=KEY_CONFIG.key())
    return MeasuredTable(measurements=(Measurement(key=key, peak_bytes=peak, note="nvml"),))


def test_measurement_overrides_the_estimate_for_the_same_key_only() -> None:
    table = measured_table(7 * GIB)
    args = {
        "arch": LLAMA_8B,
        "artifact_id": "a" * 64,
        "artifact_bytes": 4_920_000_000,
        "table": table,
        "allowances": Allowances(),
    }
    hit = predict_peak(config=KEY_CONFIG, gpu_model="NVIDIA H200", **args)  # type: ignore[arg-type]
    assert hit.source is Source.MEASURED
    assert hit.total_bytes == 7 * GIB
    assert hit.terms == (
        Term(
            name="measured peak",
            bytes=7 * GIB,
            source=Source.MEASURED,
            basis="measured on NVIDIA H200 (nvml)",
        ),
    )
    other_card = predict_peak(config=KEY_CONFIG, gpu_model="NVIDIA L4", **args)  # type: ignore[arg-type]
    other_ctx = predict_peak(
        config=config(context_tokens=4096),
        gpu_model="NVIDIA H200",
        **args,  # type: ignore[arg-type]
    )
    assert other_card.source is Source.ESTIMATED
    assert other_ctx.source is Source.ESTIMATED


def test_newest_measurement_wins_and_configurations_listed_once() -> None:
    key = MeasuredKey(artifact_id="b" * 64, gpu_model="NVIDIA L4", config_key="k1")
    other = MeasuredKey(artifact_id="b" * 64, gpu_model="NVIDIA L4", config_key="k2")
    table = MeasuredTable(
        measurements=(
            Measurement(key=key, peak_bytes=1),
            Measurement(key=other, peak_bytes=5),
            Measurement(key=key, peak_bytes=2),
        )
    )
    lookup = table.lookup(key)
    assert lookup is not None
    assert lookup.peak_bytes == 2
    assert table.configurations_of("b" * 64) == (key, other)
    assert table.configurations_of("c" * 64) == ()  # an empty list is a real answer
    assert MeasuredTable().lookup(key) is None


def test_a_prediction_never_mixes_sources() -> None:
    est = Term(name="weights", bytes=1, source=Source.ESTIMATED, basis="x")
    meas = Term(name="peak", bytes=1, source=Source.MEASURED, basis="x")
    with pytest.raises(ValueError, match="never mixes"):
        Prediction(terms=(est, meas), source=Source.ESTIMATED)
    with pytest.raises(ValueError, match="never mixes"):
        Prediction(terms=(est,), source=Source.MEASURED)
    with pytest.raises(ValueError, match="at least one term"):
        Prediction(terms=(), source=Source.MEASURED)


def test_config_key_of_the_defaults() -> None:
    assert RuntimeConfig(context_tokens=4096).key() == (
        "task=chat,ctx=4096,parallel=1,batch=512,ubatch=512,k=f16,v=f16,fa=off"
    )


def test_a_measurement_without_a_note_says_where_it_was_measured() -> None:
    key = MeasuredKey(artifact_id="a" * 64, gpu_model="NVIDIA L4", config_key=KEY_CONFIG.key())
    table = MeasuredTable(measurements=(Measurement(key=key, peak_bytes=GIB),))
    p = predict_peak(
        arch=LLAMA_8B,
        artifact_id="a" * 64,
        artifact_bytes=1,
        config=KEY_CONFIG,
        gpu_model="NVIDIA L4",
        table=table,
        allowances=Allowances(),
    )
    assert p.terms[0].basis == "measured on NVIDIA L4"


def test_config_key_names_every_setting() -> None:
    key = RuntimeConfig(
        context_tokens=2048,
        parallel=2,
        batch=1024,
        ubatch=256,
        cache_type_k=CacheType.Q8_0,
        cache_type_v=CacheType.Q4_0,
        flash_attention=True,
        task=Task.EMBED,
    ).key()
    assert key == "task=embed,ctx=2048,parallel=2,batch=1024,ubatch=256,k=q8_0,v=q4_0,fa=on"


@pytest.mark.parametrize(
    "bad",
    [
        {"n_layers": 0},
        {"n_head": -1},
        {"n_head_kv": 8, "n_head": 4},
        {"n_vocab": 0},
        {"n_ff": -1},
    ],
)
def test_architecture_rejects_impossible_values(bad: dict[str, int]) -> None:
    values = {
        "name": "llama",
        "n_layers": 2,
        "n_embd": 64,
        "n_head": 4,
        "n_head_kv": 4,
        "key_length": 16,
        "value_length": 16,
        "n_vocab": 100,
        "n_ff": 0,
        "context_length": 256,
        **bad,
    }
    with pytest.raises(ValueError):
        Architecture(**values)  # type: ignore[arg-type]


architectures = st.builds(
    lambda layers, heads, kv_div, head_dim, vocab, ff: Architecture(
        name="llama",
        n_layers=layers,
        n_embd=heads * head_dim,
        n_head=heads,
        n_head_kv=max(1, heads // kv_div),
        key_length=head_dim,
        value_length=head_dim,
        n_vocab=vocab,
        n_ff=ff,
        context_length=4096,
    ),
    st.integers(1, 96),
    st.integers(1, 64),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([32, 64, 128, 256]),
    st.integers(1, 256_000),
    st.integers(0, 50_000),
)
configs = st.builds(
    RuntimeConfig,
    context_tokens=st.integers(1, 262_144),
    parallel=st.integers(1, 8),
    batch=st.sampled_from([128, 512, 2048]),
    ubatch=st.sampled_from([128, 512]),
    cache_type_k=st.sampled_from(list(CacheType)),
    cache_type_v=st.sampled_from(list(CacheType)),
    flash_attention=st.booleans(),
    task=st.sampled_from(list(Task)),
)


# Bytes per element of each KV cache type, from ggml's published block layouts (ggml.h /
# ggml-common.h: q8_0 is 34 bytes per 32 values, q4_0 18, ...): the oracle's own table.
GGML_BYTES_PER_VALUE = {
    CacheType.F32: 4.0, CacheType.F16: 2.0, CacheType.BF16: 2.0,
    CacheType.Q8_0: 34 / 32, CacheType.Q5_1: 24 / 32, CacheType.Q5_0: 22 / 32,
    CacheType.Q4_1: 20 / 32, CacheType.Q4_0: 18 / 32, CacheType.IQ4_NL: 18 / 32,
}  # fmt: skip


def kv_lower_bound(arch: Architecture, c: RuntimeConfig) -> int:
    """The KV cache can hold no less than every layer's K and V for every context token
    (padding and blocks only add): an oracle independent of kv_cache_bytes."""
    per_token = arch.n_head_kv * (
        arch.key_length * GGML_BYTES_PER_VALUE[c.cache_type_k]
        + arch.value_length * GGML_BYTES_PER_VALUE[c.cache_type_v]
    )
    return int(arch.n_layers * c.context_tokens * per_token)


@given(architectures, configs, st.integers(1, 10**12))
def test_estimate_is_at_least_weights_plus_kv_plus_margin_floor(
    arch: Architecture, c: RuntimeConfig, size: int
) -> None:
    allow = Allowances()
    p = estimate_peak(arch, size, c, allow)
    assert p.source is Source.ESTIMATED
    assert p.total_bytes >= size + kv_lower_bound(arch, c) + allow.margin_floor_bytes
    assert p.total_bytes == sum(t.bytes for t in p.terms)


@given(architectures, configs, st.integers(1, 10**12))
def test_more_context_never_predicts_less(arch: Architecture, c: RuntimeConfig, size: int) -> None:
    from attrs import evolve

    bigger = evolve(c, context_tokens=c.context_tokens + 256)
    allow = Allowances()
    assert (
        estimate_peak(arch, size, bigger, allow).total_bytes
        >= estimate_peak(arch, size, c, allow).total_bytes
    )


@given(architectures, configs)
def test_flash_attention_never_predicts_more_compute_but_a_quantised_caches_copies(
    arch: Architecture, c: RuntimeConfig
) -> None:
    from attrs import evolve

    flash = evolve(c, flash_attention=True)
    on = compute_buffer_bytes(arch, flash)
    off = compute_buffer_bytes(arch, evolve(c, flash_attention=False))
    assert on - converted_cache_bytes(arch, flash) <= off


# TINY without a feed-forward: attention is the larger phase. Per micro-batch token, with
# flash attention: 3 x 64 (embedding) + 3 x 4 x 16 (queries) + 4 x (16 + 16) (K and V)
# = 512 floats, + 16 of slack = 528. Context 256: 256 cells, a micro-batch of 256 tokens.
NO_FF = evolve(TINY, n_ff=0)
FLASH = RuntimeConfig(context_tokens=256, flash_attention=True)
GRAPH = 256 * 528 * 4  # micro-batch x floats per token x 4 bytes
MASK = 256 * 256 * 2  # cells x rows (256, a multiple of 64) x f16
LOGITS = 1 * 355 * 4  # one sequence's row of the 355-word vocabulary, f32


def test_flash_attention_keeps_no_attention_scores() -> None:
    assert compute_buffer_bytes(NO_FF, FLASH) == GRAPH + MASK + LOGITS == 673_164


def test_a_model_without_an_output_head_computes_no_logits() -> None:
    assert compute_buffer_bytes(evolve(NO_FF, lm_head=False), FLASH) == GRAPH + MASK == 671_744


def test_the_masks_rows_are_the_micro_batch_rounded_up_to_64() -> None:
    config = RuntimeConfig(context_tokens=256, ubatch=100)  # 100 rows -> 128; f32 without flash
    assert mask_bytes(TINY, config) == 256 * 128 * 4 == 131_072


def test_a_sliding_window_keeps_window_plus_micro_batch_rounded_up_to_256_cells() -> None:
    arch = evolve(TINY, sliding_window=1000, swa_layers=1)
    # 1000 x 1 sequence + a micro-batch of 512 = 1512 cells -> 1536, under the 4096 of the cache
    assert swa_cells(arch, RuntimeConfig(context_tokens=4096)) == 1536


def test_a_model_server_runs_one_sequence() -> None:
    config = runtime_config(SUMMARY, Task.CHAT, 2048)
    assert (config.context_tokens, config.parallel, config.task) == (2048, 1, Task.CHAT)


def test_flash_attention_over_a_quantised_cache_counts_its_f16_copies() -> None:
    """Measured on an H200 (CUDA 13): at 131,072 cells, 16 KV heads of 64, a q8_0 cache
    made a 648 MiB compute buffer where f16 made 151; the copies are 512 MiB."""
    arch = Architecture(
        name="llama", n_layers=8, n_embd=1024, n_head=16, n_head_kv=16, key_length=64,
        value_length=64, n_vocab=355, n_ff=2816, context_length=131_072,
    )  # fmt: skip
    q8 = RuntimeConfig(
        context_tokens=131_072, flash_attention=True, cache_type_k=CacheType.Q8_0,
        cache_type_v=CacheType.Q8_0,
    )  # fmt: skip
    assert converted_cache_bytes(arch, q8) == 131_072 * 16 * (64 + 64) * 2 == 512 * MIB
    assert converted_cache_bytes(arch, evolve(q8, cache_type_v=CacheType.F16)) == 256 * MIB
    assert converted_cache_bytes(arch, evolve(q8, flash_attention=False)) == 0
    f16 = evolve(q8, cache_type_k=CacheType.F16, cache_type_v=CacheType.F16)
    assert converted_cache_bytes(arch, f16) == 0
    assert compute_buffer_bytes(arch, q8) - compute_buffer_bytes(arch, f16) == 512 * MIB
