"""How a batch job ends (every request has a result, or a person asked it to stop), how its
results are counted, and what happens to an answer too large to keep."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.batches import (
    BatchCounts,
    BatchRequest,
    BatchResult,
    batch_counts,
    batch_end,
    kept_or_too_large,
    results_complete,
)
from nodeau.domain.workloads import WorkloadState


def req(custom_id: str) -> BatchRequest:
    return BatchRequest(line_no=1, custom_id=custom_id, url="/v1/chat/completions", body={})


def res(custom_id: str, status: int | None = 200) -> BatchResult:
    error = None if status is not None and status < 400 else "no"
    return BatchResult(id="x", custom_id=custom_id, status_code=status, body={}, error=error)


def test_counts_take_one_result_per_request_of_the_job() -> None:
    requests = [req("a"), req("b"), req("c")]
    results = [res("a"), res("a", 500), res("b", 500), res("zz")]  # a twice, zz not the job's
    assert batch_counts(requests, results) == BatchCounts(total=3, done=1, failed=1)
    assert batch_counts(requests, results).left == 1


@pytest.mark.parametrize(
    ("done", "failed", "stop", "end"),
    [
        (3, 0, False, WorkloadState.SUCCEEDED),
        (1, 2, False, WorkloadState.SUCCEEDED),  # a failed request still has its result
        (3, 0, True, WorkloadState.SUCCEEDED),  # complete before the stop mattered
        (1, 0, True, WorkloadState.STOPPED),
        (0, 0, True, WorkloadState.STOPPED),
        (2, 0, False, None),
    ],
)
def test_a_job_ends_when_complete_or_asked_to_stop(
    done: int, failed: int, stop: bool, end: WorkloadState | None
) -> None:
    assert batch_end(BatchCounts(total=3, done=done, failed=failed), stop_asked=stop) is end


def test_a_job_with_no_requests_is_never_complete() -> None:
    assert not results_complete(BatchCounts(total=0, done=0, failed=0))


@given(st.lists(st.sampled_from("abcdef"), max_size=12), st.lists(st.sampled_from("abcxyz")))
def test_counts_never_exceed_the_requests(ids: list[str], answered: list[str]) -> None:
    requests = [req(i) for i in dict.fromkeys(ids)]
    counts = batch_counts(requests, [res(a) for a in answered])
    assert counts.done + counts.failed + counts.left == counts.total == len(requests)
    assert results_complete(counts) == (bool(requests) and set(ids) <= set(answered))


def test_an_answer_too_large_to_keep_becomes_an_error_result() -> None:
    line = {"id": "r1", "custom_id": "a", "response": {"status_code": 200, "body": "x" * 50}}
    size = len(json.dumps(line))
    assert kept_or_too_large(line, size, size) == line
    assert kept_or_too_large(line, size, size - 1) == {
        "id": "r1",
        "custom_id": "a",
        "response": None,
        "error": {
            "message": f"the answer is {size} bytes, more than the {size - 1} bytes a result "
            "may take where this job's results are kept"
        },
    }
