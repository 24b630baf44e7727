"""Reading the buffers llama-server reports at load from its log."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.runtime_buffers import MIB, ReportedBuffers, reported_buffers, reported_total

# What llama-server 0.3.36's vendored llama.cpp printed at -lv 4 for Gemma 3 270M on CPU
# (two model buffers, a KV cache per kind of layer), abridged.
GEMMA_LOG = """\
0.00.176.273 I load_tensors: loading model tensors, this can take a while... (load_mode = mmap)
0.00.184.725 I load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
0.00.184.726 I load_tensors:   CPU_REPACK model buffer size =    12.66 MiB
0.00.187.484 I llama_context:        CPU  output buffer size =     1.00 MiB
0.01.204.326 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells
0.00.187.643 I llama_kv_cache:        CPU KV buffer size =    12.00 MiB
0.01.233.001 I llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
0.00.187.644 I llama_kv_cache:        CPU KV buffer size =    15.00 MiB
0.00.203.626 I sched_reserve:        CPU compute buffer size =    51.76 MiB
0.00.203.658 I sched_reserve: graph: nodes = 1086, splits = 1
1.01.935.648 D ~llama_context:        CPU compute buffer size is  51.7588 MiB, matches expectation
"""


def mib(value: float) -> int:
    return round(value * MIB)


def test_every_kind_of_buffer_is_summed_and_a_cpu_repacked_copy_kept_apart() -> None:
    assert reported_buffers(GEMMA_LOG) == ReportedBuffers(
        model_bytes=mib(235.16),
        kv_bytes=mib(12.00) + mib(15.00),
        compute_bytes=mib(51.76),
        output_bytes=mib(1.00),
        repack_bytes=mib(12.66),
    )
    found = reported_buffers(GEMMA_LOG)
    assert found is not None
    # the repacked copy is the CPU kernels' own: no card holds it, so no total counts it
    assert found.total_bytes == mib(235.16) + mib(27.00) + mib(51.76) + mib(1.00)


def test_a_servers_log_file_gives_its_total_or_none(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    assert reported_total(log) is None  # no log yet
    log.write_text(GEMMA_LOG, encoding="utf-8")
    assert reported_total(log) == mib(235.16) + mib(27.00) + mib(51.76) + mib(1.00)
    log.write_bytes(b"\xff\xfe not a llama.cpp log \x00")
    assert reported_total(log) is None


def test_an_encoder_without_kv_cache_reports_none_and_that_is_zero() -> None:
    log = "\n".join(line for line in GEMMA_LOG.splitlines() if "KV buffer" not in line)
    found = reported_buffers(log)
    assert found is not None
    assert found.kv_bytes == 0


def test_offloaded_layers_add_a_card_buffer_and_each_backend_computes() -> None:
    log = """\
load_tensors:        CUDA0 model buffer size =  1000.00 MiB
load_tensors:   CPU_Mapped model buffer size =   100.00 MiB
llama_context:  CUDA_Host  output buffer size =     0.50 MiB
llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB
sched_reserve:      CUDA0 compute buffer size =   300.00 MiB
sched_reserve:  CUDA_Host compute buffer size =    20.00 MiB
"""
    found = reported_buffers(log)
    assert found is not None
    assert found.model_bytes == mib(1100)
    assert found.compute_bytes == mib(320)


def test_a_new_reservation_replaces_the_last_and_a_new_load_starts_afresh() -> None:
    again = GEMMA_LOG + "sched_reserve:        CPU compute buffer size =    60.00 MiB\n"
    found = reported_buffers(again)
    assert found is not None
    assert found.compute_bytes == mib(60)
    reloaded = GEMMA_LOG + GEMMA_LOG
    assert reported_buffers(reloaded) == reported_buffers(GEMMA_LOG)


def test_a_log_below_verbosity_4_has_no_buffers() -> None:
    default = """\
0.00.267.658 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 512
0.01.052.363 I srv  llama_server: model loaded
"""
    assert reported_buffers(default) is None
    assert reported_buffers("") is None
    only_model = GEMMA_LOG.splitlines()[1]
    assert reported_buffers(only_model) is None


@given(st.text())
def test_garbage_never_crashes_the_parser(text: str) -> None:
    found = reported_buffers(text)
    assert found is None or found.total_bytes >= 0


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["model", "KV", "compute", "output", "weird"]),
            st.sampled_from(["CPU", "CUDA0", "CPU_Mapped", ""]),
            st.one_of(
                st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda f: f"{f:.2f}"),
                st.text(max_size=12),
            ),
        ),
        max_size=20,
    ),
    st.text(max_size=40),
)
def test_near_miss_lines_never_crash_the_parser(
    lines: list[tuple[str, str, str]], noise: str
) -> None:
    log = "\n".join(f"{b} {k} buffer size = {v} MiB{noise}" for k, b, v in lines)
    found = reported_buffers(log)
    assert found is None or found.total_bytes >= 0
