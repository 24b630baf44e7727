"""``nodeau dashboard`` as the end-to-end tests run it: the installed command, real HTTP.

``Cli`` is the installed command on simulated cards ("2 x 24 GiB"); ``leave_nothing``
stops whatever a test started; ``whole_board`` reads the board with the CLI's JSON of
every view; ``same_moment`` compares it with a command read between two boards.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.dashboard.repeated_texts import expanded
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli as BaseCli

DEADLINE_S = 120.0
# a program that compares the board with the CLI at one moment asks for a fresh read (a
# poll gets the board kept since the last one: apps/dashboard/board_cache.py)
FRESH = {"Cache-Control": "no-cache"}


def whole_board(client: httpx.Client, headers: dict[str, str]) -> dict[str, Any]:
    """The board with the CLI's JSON of every view (``?with=cli``, from the same read as
    the page's sections), its tables' repeated texts expanded (apps/dashboard/repeated_texts.py)."""
    answer = client.get("/api/board", params={"with": "cli"}, headers=headers)
    assert answer.status_code == 200, answer.text
    return expanded(answer.json())


class Cli(BaseCli):
    def __init__(self, home: Path) -> None:
        super().__init__(home, NODEAU_SIMULATED_GPUS="2 x 24 GiB")
        self.home = home

    def dashboard(self) -> dict[str, Any]:
        opened: dict[str, Any] = self.json("dashboard")  # type: ignore[assignment]
        return opened


def leave_nothing(c: Cli) -> None:
    """Stop the dashboard, every batch job and every workload, whatever the test did."""
    c("dashboard", "--stop")
    listed = c("batch", "status", "--json")
    if listed.returncode == 0:
        for row in json.loads(listed.stdout):
            c("batch", "stop", row["name"])
    done = c("ps", "--json")
    if done.returncode == 0:
        for row in json.loads(done.stdout):
            c("stop", row["name"], "--workload")


def http(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=60, trust_env=False, follow_redirects=False)


def without(document: Any, *keys: str) -> Any:
    """``document`` with ``keys`` left out of every object in it (moments read at each call)."""
    if isinstance(document, dict):
        return {k: without(v, *keys) for k, v in document.items() if k not in keys}
    if isinstance(document, list):
        return [without(v, *keys) for v in document]
    return document


def wait_for(what: str, ready: Any) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = ready()
        if found:
            return found
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


AGE = re.compile(r"\((\d+)([smhd])\)")  # a sentence's "how long ago": "(45s)", "(4m)"
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def aged(value: Any) -> tuple[Any, list[int]]:
    """``value`` with every age in its strings replaced by "(AGE)", and those ages in seconds,
    in order (strings in lists and dicts included)."""
    ages: list[int] = []

    def kept(m: re.Match[str]) -> str:
        ages.append(int(m[1]) * UNIT_S[m[2]])
        return "(AGE)"

    def mask(v: Any) -> Any:
        if isinstance(v, str):
            return AGE.sub(kept, v)
        if isinstance(v, list):
            return [mask(x) for x in v]
        if isinstance(v, dict):
            return {k: mask(x) for k, x in v.items()}
        return v

    return mask(value), ages


def same_moment(
    first: Callable[[], Any], second: Callable[[], Any], part: Callable[[Any], Any]
) -> tuple[Any, Any]:
    """``second()`` read between two ``first()``: it must say what ``part(first())`` says,
    word for word, but for how long ago ("(45s)"), which must lie between what the read before
    and the read after said (each is rounded down at its own moment, and a command can take
    over a second to read). Read again while the state itself changed between the reads;
    returns the read after and ``second()``'s."""
    for _ in range(20):
        before, said, after = first(), second(), first()
        (was, was_ages), (now, now_ages), (then, then_ages) = (
            aged(part(before)), aged(said), aged(part(after))
        )  # fmt: skip
        if was == then and len(was_ages) == len(then_ages):
            assert now == was, (now, was)
            assert len(now_ages) == len(was_ages), (said, part(before))
            assert all(
                a <= b <= c for a, b, c in zip(was_ages, now_ages, then_ages, strict=True)
            ), (was_ages, now_ages, then_ages)
            return after, said
    raise AssertionError(f"the state kept changing between reads: {part(before)} / {said}")


def batch_request(n: int) -> str:
    body = {"model": "tiny", "messages": [{"role": "user", "content": f"hi {n}"}], "max_tokens": 32}
    line = {"custom_id": f"q{n}", "method": "POST", "url": "/v1/chat/completions", "body": body}
    return json.dumps(line)


def serve_and_submit(cli: Cli, tmp_path: Path) -> None:
    """A chat service ``tiny`` and a long batch job ``long`` running, both on tiny models."""
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    done = cli("run", "tiny", "--unproved", "--context", "512")
    assert done.returncode == 0, done.stderr
    jobs = tmp_path / "long.jsonl"
    jobs.write_text("".join(batch_request(n) + "\n" for n in range(1000)), encoding="utf-8")
    submitted = cli("batch", "submit", str(jobs), "--model", "tiny", "--unproved", "--name", "long")
    assert submitted.returncode == 0, submitted.stderr
    wait_for(
        "the batch job running",
        lambda: cli.json("batch", "status", "long")["state"] == "running",  # type: ignore[index]
    )


def artifact_of(cli: Cli, name: str) -> str:
    state = SqliteStateStore(cli.home / "state.sqlite3", lambda: datetime.now(UTC))
    record = state.snapshot().named(name)
    assert record is not None
    return record.workload.artifact_id
