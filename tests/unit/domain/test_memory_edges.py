"""Memory figures at the points the mutation run found unchecked, against arithmetic done
by hand in each test: the attention scores flash attention leaves out, the logits of a
model without an output head, the mask rows and sliding-window cells rounded up to
llama.cpp's paddings, and the one sequence a model server runs."""

from __future__ import annotations

from attrs import evolve

from nodeau.domain.memory import (
    RuntimeConfig,
    compute_buffer_bytes,
    mask_bytes,
    swa_cells,
)
from nodeau.domain.model_info import runtime_config
from nodeau.domain.tasks import Task
from tests.support.kube_controller import SUMMARY
from tests.unit.domain.test_memory import TINY

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
