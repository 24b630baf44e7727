"""Model info: predictions at a few context sizes, all estimated, and what was measured."""

from __future__ import annotations

import pytest
from attrs import evolve

from nodeau.domain.allowances import Allowances
from nodeau.domain.memory import (
    MeasuredKey,
    MeasuredTable,
    Measurement,
    RuntimeConfig,
    Source,
    estimate_peak,
)
from nodeau.domain.model_info import ModelSummary, info_contexts, model_info
from nodeau.domain.tasks import Task
from tests.support.builders.architectures import TINY


def summary(context: int) -> ModelSummary:
    return ModelSummary(
        architecture=evolve(TINY, context_length=context),
        quantisation="Q8_0",
        tensor_count=21,
        tensor_bytes=100,
        has_tokenizer=True,
        has_chat_template=True,
    )


@pytest.mark.parametrize(
    ("trained", "contexts"),
    [
        (256, (256,)),
        (4096, (4096,)),
        (8192, (4096, 8192)),
        (32768, (4096, 8192, 32768)),
        (131072, (4096, 8192, 32768, 131072)),
        (10000, (4096, 8192, 10000)),
    ],
)
def test_contexts_shown_go_up_to_the_models_own(trained: int, contexts: tuple[int, ...]) -> None:
    assert info_contexts(summary(trained)) == contexts


def test_every_prediction_is_an_estimate_and_measurements_are_listed() -> None:
    allow = Allowances()
    key = MeasuredKey(artifact_id="a" * 64, gpu_model="NVIDIA L4", config_key="k")
    other = MeasuredKey(artifact_id="b" * 64, gpu_model="NVIDIA L4", config_key="k")
    table = MeasuredTable(
        measurements=(Measurement(key=key, peak_bytes=5), Measurement(key=other, peak_bytes=6))
    )
    info = model_info(
        artifact_id="a" * 64, size_bytes=1000, summary=summary(8192), table=table, allowances=allow
    )
    assert [e.context_tokens for e in info.estimates] == [4096, 8192]
    assert info.summary == summary(8192)  # the architecture values shown beside them
    for e in info.estimates:
        assert e.prediction.source is Source.ESTIMATED
        expected = estimate_peak(
            summary(8192).architecture, 1000, RuntimeConfig(context_tokens=e.context_tokens), allow
        )
        assert e.prediction == expected
    assert info.measured == (key,)
    assert (info.artifact_id, info.size_bytes) == ("a" * 64, 1000)
    none = model_info(
        artifact_id="c" * 64, size_bytes=1000, summary=summary(256), table=table, allowances=allow
    )
    assert none.measured == ()  # an empty list is a real answer


def test_the_task_shapes_the_estimate() -> None:
    allow = Allowances()
    embed = model_info(
        artifact_id="a" * 64,
        size_bytes=1000,
        summary=summary(256),
        table=MeasuredTable(),
        allowances=allow,
        task=Task.EMBED,
    )
    config = RuntimeConfig(context_tokens=256, task=Task.EMBED)
    assert embed.estimates[0].prediction == estimate_peak(
        summary(256).architecture, 1000, config, allow
    )


def test_a_summary_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="tensor_count must not be negative, got -1"):
        evolve(summary(256), tensor_count=-1)


@pytest.mark.parametrize(
    ("file_type", "declared", "label"),
    [
        (None, "Q8_0", "Q8_0"),
        ("MOSTLY_Q8_0", "Q8_0", "Q8_0"),
        ("MOSTLY_Q4_K_M", "Q4_K_M", "Q4_K_M (most bytes Q8_0)"),
        ("ALL_F32", "F32", "F32 (most bytes Q8_0)"),
        ("GUESSED", "Q8_0", "Q8_0"),
        ("unknown (99)", "Q8_0", "Q8_0"),
    ],
)
def test_the_quantisation_is_the_one_declared_with_the_bytes_when_they_differ(
    file_type: str | None, declared: str, label: str
) -> None:
    s = evolve(summary(4096), file_type=file_type)
    assert (s.declared_quantisation, s.quantisation_label) == (declared, label)
