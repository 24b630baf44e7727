"""The endpoint's log under a flood of malformed requests, in its own process as its service
runs it (stderr to a file): each is answered a JSON 400, and the log keeps a few lines of
them and one line counting the rest, not a line for each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from nodeau.apps.endpoint.log_bound import PER_KIND
from tests.support.real.endpoint import raw_exchange
from tests.support.real.idle_connections import BOUND_S, eventually
from tests.support.real.upstream import free_port

ROOT = Path(__file__).resolve().parents[2]
FLOOD = 300
SERVE = """
import sys
from nodeau.apps.endpoint.serve import serve
serve(int(sys.argv[1]), lambda: None, log_level="info")
"""


def test_a_flood_of_malformed_requests_leaves_a_few_lines_and_a_count(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "endpoint.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        eventually("the endpoint listens", lambda: "Uvicorn running" in log.read_text())
        answers = [raw_exchange(url, b"\x16\x03\x01 GARBAGE\r\n\r\n") for _ in range(FLOOD)]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(BOUND_S)
    assert all(json.loads(a.partition(b"\r\n\r\n")[2])["error"]["code"] == 400 for a in answers)
    lines = log.read_text().splitlines()
    refused = [line for line in lines if "not HTTP/1.1 was refused (400)" in line]
    assert len(refused) == PER_KIND
    assert f"WARNING:  {FLOOD - PER_KIND} log records were left out" in "\n".join(lines)
    assert len(lines) < 20  # uvicorn's own lines at start and stop, those, and the count
