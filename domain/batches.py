"""Batch jobs: the requests of an OpenAI batch file, the problems of its bad lines, the results.

Why it is so: docs/adr/decisions/domain.md (batches.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import frozen

from nodeau.domain.workloads import WorkloadState


@frozen(kw_only=True)
class BatchRequest:
    """One valid line of a batch file."""

    line_no: int
    custom_id: str
    url: str
    body: Mapping[str, Any]


@frozen(kw_only=True)
class LineProblem:
    """Why one line of a batch file will not run."""

    line_no: int
    problem: str

    def __str__(self) -> str:
        return f"line {self.line_no}: {self.problem}"


@frozen(kw_only=True)
class BatchResult:
    """One line of a batch's output: the server's answer, or why there is none."""

    id: str
    custom_id: str
    status_code: int | None
    body: Any
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.error is None and self.status_code is not None and self.status_code < 400


def parse_batch_lines(
    lines: Iterable[str], allowed_urls: Iterable[str]
) -> tuple[tuple[BatchRequest, ...], tuple[LineProblem, ...]]:
    """The requests and the problems of a batch file's lines (line numbers start at 1)."""
    allowed = tuple(allowed_urls)
    requests: list[BatchRequest] = []
    problems: list[LineProblem] = []
    seen: dict[str, int] = {}
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parsed = parse_batch_line(line_no, line, allowed, seen)
        if isinstance(parsed, LineProblem):
            problems.append(parsed)
        else:
            seen[parsed.custom_id] = line_no
            requests.append(parsed)
    return tuple(requests), tuple(problems)


def parse_batch_line(
    line_no: int, line: str, allowed: tuple[str, ...], seen: Mapping[str, int]
) -> BatchRequest | LineProblem:
    """One line as a request, or the one problem that stops it."""

    def problem(text: str) -> LineProblem:
        return LineProblem(line_no=line_no, problem=text)

    try:
        item = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return problem(f"not valid JSON ({exc.__class__.__name__})")
    if not isinstance(item, dict):
        return problem("not a JSON object")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip():
        return problem("no custom_id (a non-empty string)")
    if custom_id in seen:
        return problem(f"custom_id {custom_id!r} is already used on line {seen[custom_id]}")
    if item.get("method") != "POST":
        return problem(f"method must be POST, not {item.get('method')!r}")
    url = item.get("url")
    if url not in allowed:
        return problem(f"url {url!r} is not one this batch answers ({', '.join(allowed)})")
    body = item.get("body")
    if not isinstance(body, dict):
        return problem("body must be a JSON object")
    return BatchRequest(line_no=line_no, custom_id=custom_id, url=str(url), body=body)


def result_line(result: BatchResult) -> dict[str, Any]:
    """A result in the OpenAI batch output format."""
    response = (
        None
        if result.status_code is None
        else {"status_code": result.status_code, "body": result.body}
    )
    error = None if result.error is None else {"message": result.error}
    return {"id": result.id, "custom_id": result.custom_id, "response": response, "error": error}


def result_from_line(item: Any) -> BatchResult | None:
    """A result read back from an output line; None for anything that is not one."""
    if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
        return None
    response = item.get("response")
    error = item.get("error")
    status = response.get("status_code") if isinstance(response, dict) else None
    return BatchResult(
        id=str(item.get("id", "")),
        custom_id=item["custom_id"],
        status_code=status if isinstance(status, int) else None,
        body=response.get("body") if isinstance(response, dict) else None,
        error=str(error.get("message")) if isinstance(error, dict) else None,
    )


def still_to_run(
    requests: Iterable[BatchRequest], done_ids: Iterable[str]
) -> tuple[BatchRequest, ...]:
    """The requests without a recorded result: nothing redone, nothing lost."""
    done = frozenset(done_ids)
    return tuple(r for r in requests if r.custom_id not in done)


@frozen(kw_only=True)
class BatchCounts:
    """How far a job has come: requests to run, answered, failed (no answer, or an error)."""

    total: int
    done: int
    failed: int

    @property
    def left(self) -> int:
        return max(0, self.total - self.done - self.failed)


def batch_counts(requests: Iterable[BatchRequest], results: Iterable[BatchResult]) -> BatchCounts:
    """The counts of a job's requests by their results: one result per ``custom_id`` of the
    job counts (the first written), so a result written twice is never counted twice."""
    wanted = {r.custom_id for r in requests}
    seen: dict[str, BatchResult] = {}
    for result in results:
        if result.custom_id in wanted and result.custom_id not in seen:
            seen[result.custom_id] = result
    done = sum(1 for r in seen.values() if r.succeeded)
    return BatchCounts(total=len(wanted), done=done, failed=len(seen) - done)


def results_complete(counts: BatchCounts) -> bool:
    """A batch job whose every request has a result is done: nothing is left to send."""
    return counts.total > 0 and counts.left == 0


def kept_or_too_large(line: Mapping[str, Any], size: int, limit: int) -> dict[str, Any]:
    """A result line as it can be kept where results are kept in pieces of at most ``limit``
    bytes: itself, or (an answer that alone is larger) an error saying so instead of the
    answer, so that the request still has its one result."""
    if size <= limit:
        return dict(line)
    return {
        "id": line.get("id"),
        "custom_id": line.get("custom_id"),
        "response": None,
        "error": {
            "message": f"the answer is {size} bytes, more than the {limit} bytes a result "
            "may take where this job's results are kept"
        },
    }


def batch_end(counts: BatchCounts, *, stop_asked: bool) -> WorkloadState | None:
    """How a running batch job ends now, if it does: succeeded once its results are
    complete (even when a stop was asked too late to matter), stopped when a person asked;
    None while it runs on."""
    if results_complete(counts):
        return WorkloadState.SUCCEEDED
    if stop_asked:
        return WorkloadState.STOPPED
    return None
