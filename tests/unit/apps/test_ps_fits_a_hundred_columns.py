"""``nodeau ps``'s default table fits 100 columns (apps/cli/ps_command.py): GPU ids cut to
their first group, each row's endpoint and sentence on their own lines beneath it, whole;
``-o wide`` keeps one line a workload with full UUIDs."""

from __future__ import annotations

from datetime import UTC, datetime

from nodeau.apps.cli.ps_command import HEADERS, narrow, row, short_gpu
from nodeau.apps.cli.render import table
from nodeau.apps.planes.workload_view import WorkloadView

UUID = "GPU-2c3ba94a-dcfc-5b93-9543-2e6eb24c6d0b"
LONG = "smollm2-135m-instruct-q4-1"  # the README's own model, named after it
SENTENCE = (
    "held since 10:01:00 (9m): m1 stopped answering and no other machine has a free card "
    "that fits; it starts when one frees (no retries); nodeau recovery status says why"
)


def view(**fields: object) -> WorkloadView:
    defaults: dict[str, object] = {
        "name": LONG,
        "kind": "service",
        "model": LONG,
        "machine": "garage-12",
        "gpu": UUID,
        "simulated": False,
        "state": "recovering",
        "since": datetime(2026, 12, 3, tzinfo=UTC),
        "endpoint": "http://127.0.0.1:43855/v1",
        "sentence": SENTENCE,
    }
    return WorkloadView(**{**defaults, **fields})  # type: ignore[arg-type]


def test_a_uuid_is_cut_to_its_first_group_and_a_simulated_one_keeps_its_prefix() -> None:
    assert short_gpu(UUID) == "GPU-2c3ba94a"
    assert short_gpu("SIM-GPU-092fee4d-8a0c-5c09-bf89-10b04b9d1b58") == "SIM-GPU-092fee4d"
    assert short_gpu("not-a-uuid") == "not-a-uuid"


def test_the_table_fits_a_hundred_columns_with_the_readmes_long_names() -> None:
    batch = view(name="nightly-batch", kind="batch", state="running", endpoint=None)
    lines = narrow([view(), batch]).splitlines()
    row_lines = [line for line in lines if not line.startswith("  ")]
    assert all(len(line) <= 100 for line in row_lines), row_lines
    assert lines[1].split() == [LONG, "service", LONG, "garage-12", "GPU-2c3ba94a", "recovering"]
    assert lines[2:4] == ["  http://127.0.0.1:43855/v1", f"  {SENTENCE}"]  # the sentence whole
    assert lines[4].split()[0] == "nightly-batch" and lines[5] == f"  {SENTENCE}"  # no address


def test_a_model_on_the_cpu_is_said_beside_its_card() -> None:
    [_, line, *_] = narrow([view(on_cpu=True)]).splitlines()
    assert "GPU-2c3ba94a (model on CPU)" in line


def test_wide_is_one_line_a_workload_with_the_whole_uuid() -> None:
    lines = table(HEADERS, [row(view())]).splitlines()
    assert len(lines) == 2 and UUID in lines[1] and lines[1].endswith(SENTENCE)
