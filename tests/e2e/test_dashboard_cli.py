"""``nodeau dashboard`` end to end: the installed command, its user service, real HTTP on loopback.

It prints its address with a fresh token, refuses what it must, says what the CLI says, stops a
real batch job and answers the Playground from a real llama-server (simulated cards, CPU).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gguf import GGUFValueType, Keys

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.dashboard_cli import (
    FRESH,
    Cli,
    artifact_of,
    http,
    leave_nothing,
    same_moment,
    serve_and_submit,
    whole_board,
    without,
)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home")
    yield c
    leave_nothing(c)


def test_the_dashboard_starts_once_gives_a_fresh_token_and_refuses_what_it_must(
    cli: Cli,
) -> None:
    first = cli.dashboard()
    assert first["started"] is True
    port = first["port"]
    assert first["address"] == f"http://127.0.0.1:{port}"
    assert first["url"] == f"http://127.0.0.1:{port}/?token={first['token']}"
    token_file = cli.home / "dashboard" / "token"
    assert token_file.read_text().strip() == first["token"]
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700

    again = cli.dashboard()  # found running: same port, a fresh token, the old one refused
    assert (again["started"], again["port"]) == (False, port)
    assert again["token"] != first["token"]
    text = cli("dashboard")
    assert text.returncode == 0, text.stderr
    assert f"dashboard already running at http://127.0.0.1:{port}" in text.stdout
    token = token_file.read_text().strip()
    assert f"open: http://127.0.0.1:{port}/?token={token}" in text.stdout

    base = f"http://127.0.0.1:{port}"
    bearer = {"Authorization": f"Bearer {token}"}
    with http(base) as client:
        for route in ("/", "/assets/dashboard.js", "/api/session", "/api/board"):
            assert client.get(route).status_code == 401, route
            old = {"Authorization": f"Bearer {first['token']}"}
            assert client.get(route, headers=old).status_code == 401, route
            assert client.get(route, headers=bearer).status_code == 200, route
        assert client.get("/", params={"token": "wrong"}).status_code == 401
        exchanged = client.get("/", params={"token": token})
        assert exchanged.status_code == 303 and exchanged.headers["location"] == "/"
        assert "HttpOnly" in exchanged.headers["set-cookie"]
        assert client.get("/").status_code == 200  # with the cookie it set
        client.cookies.clear()

        for headers, status in (
            ({"Host": f"evil.example:{port}"}, 403),
            ({"Host": f"127.0.0.1:{port + 1}"}, 403),
            ({"Origin": "http://evil.example"}, 403),
            ({"Origin": "http://127.0.0.1:1"}, 403),
            ({"Origin": base}, 200),
        ):
            answer = client.get("/api/board", headers={**bearer, **headers})
            assert answer.status_code == status, (headers, answer.text)
            assert not [h for h in answer.headers if h.startswith("access-control-")]
        for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
            for route in ("/", "/api/board", "/api/batches/x/stop"):
                assert client.request(method, route, headers=bearer).status_code == 405
        assert client.post("/api/board", headers=bearer).status_code == 405
        refused = client.post("/api/batches/x/stop", headers=bearer)  # no CSRF token
        assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
        csrf = client.get("/api/session", headers=bearer).json()["csrf"]
        unknown = client.post("/api/batches/x/stop", headers={**bearer, "X-Nodeau-CSRF": csrf})
        assert unknown.status_code == 409
        assert unknown.json()["error"]["message"].startswith("no batch job called 'x'")

        page = client.get("/api/board", headers=bearer).json()
        assert "cli" not in page and page["workloads"]["targets"] == []  # what the page needs
        wrong = client.get("/api/board", params={"with": "everything"}, headers=bearer)
        assert wrong.status_code == 400
        assert wrong.json()["error"]["message"].startswith("with= takes only cli")
        board = whole_board(client, {**bearer, **FRESH})
    # the same figures as the CLI's own --json
    assert board["cli"]["ps"] == cli.json("ps") == []
    assert without(board["cli"]["fleet_list"], "reported_at") == without(
        cli.json("fleet", "list"), "reported_at"
    )
    assert board["cli"]["model_status"] == cli.json("model", "status")
    assert without(board["cli"]["plan"], "clock", "clock_anchor") == without(
        cli.json("plan"), "clock", "clock_anchor"
    )
    [machine] = board["hardware"]["machines"]
    assert machine["machine"] == "testbox"
    assert [row[0] for row in machine["gpus"]["rows"]] == [
        g["uuid"] + " (simulated)" for g in cli.json("fleet", "list")["machines"][0]["gpus"]
    ]
    assert board["notes"]["copies"].startswith("copies are kept between the machines of a fleet")

    log = (cli.home / "logs" / "dashboard.log").read_text()
    for shown in (first["token"], again["token"], token):
        assert shown not in log  # never logged

    stopped = cli("dashboard", "--stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    with pytest.raises(httpx.ConnectError), http(base) as client:
        client.get("/api/board", headers=bearer)


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) of each server-sent event in ``text``."""
    found = []
    for block in text.split("\n\n"):
        kind, data = "message", []
        for line in block.splitlines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            found.append((kind, "\n".join(data)))
    return found


@pytest.mark.slow
def test_the_board_says_what_ps_says_stops_a_batch_job_and_the_playground_answers(
    cli: Cli, tmp_path: Path
) -> None:
    serve_and_submit(cli, tmp_path)
    opened = cli.dashboard()
    bearer = {"Authorization": f"Bearer {opened['token']}"}
    with http(opened["address"]) as client:
        # a sentence says how long ago ("(5s)"): ps is read between two boards
        board, ps = same_moment(
            lambda: whole_board(client, {**bearer, **FRESH}),
            lambda: cli.json("ps"),
            lambda board: board["cli"]["ps"],
        )
        assert {row["kind"] for row in ps} == {"service", "batch"}
        # the page's table is the same read's ps, sentence for sentence
        shown = {row[0]: row[-1] for row in board["workloads"]["rows"]}
        assert shown == {row["name"]: row["sentence"] for row in board["cli"]["ps"]}
        assert board["batches"]["stoppable"] == ["long"]
        held = {
            g["held_by"]: g["reserved_bytes"]
            for g in board["cli"]["fleet_list"]["machines"][0]["gpus"]
        }
        assert set(held) == {"tiny", "long"}

        # the one action: stop the batch job
        csrf = client.get("/api/session", headers=bearer).json()["csrf"]
        stop = client.post("/api/batches/long/stop", headers={**bearer, "X-Nodeau-CSRF": csrf})
        assert stop.status_code == 200, stop.text
        assert "stopped" in stop.json()["sentence"]
        assert cli.json("batch", "status", "long")["state"] == "stopped"
        after = whole_board(client, bearer)
        assert [row["name"] for row in after["cli"]["ps"]] == ["tiny"]
        assert after["batches"]["stoppable"] == []

        # the Playground: a streamed chat through the service's own endpoint
        described = client.get("/api/playground/tiny", headers=bearer).json()
        assert described["task"] == "chat"
        who = {
            "workload": "tiny",
            "model": "tiny",
            "artifact": artifact_of(cli, "tiny"),
            "machine": "testbox",
            "gpu": ps[[r["name"] for r in ps].index("tiny")]["gpu"],
            "endpoint": ps[[r["name"] for r in ps].index("tiny")]["endpoint"],
        }
        assert described["answered_by"] == who
        ask = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
        chat = client.post(
            "/api/playground/tiny/chat", json=ask, headers={**bearer, "X-Nodeau-CSRF": csrf}
        )
        assert chat.status_code == 200, chat.text
        assert chat.headers["content-type"].startswith("text/event-stream")
        events = sse_events(chat.text)
        kind, first = events[0]
        assert kind == "nodeau"
        said = json.loads(first)
        assert said["answered_by"] == who
        assert said["request"] == {**ask, "model": "tiny", "stream": True}
        assert who["endpoint"] + "/chat/completions" in said["snippets"]["curl"]
        chunks = [json.loads(d) for k, d in events[1:] if k == "message" and d != "[DONE]"]
        assert len(chunks) >= 2
        assert events[-1] == ("message", "[DONE]")
        assert "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        # an embed call to a chat service is refused, in one line
        wrong = client.post(
            "/api/playground/tiny/embed", json={"input": ["x"]},
            headers={**bearer, "X-Nodeau-CSRF": csrf},
        )  # fmt: skip
        assert wrong.status_code == 400
        assert wrong.json()["error"]["message"] == "tiny serves chat, not embed"


@pytest.mark.slow
def test_the_playground_embeds_through_an_embed_service(cli: Cli, tmp_path: Path) -> None:
    pooling = {Keys.LLM.POOLING_TYPE.format(arch="llama"): (1, GGUFValueType.UINT32)}
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, override_keys=pooling)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    done = cli(
        "run", "tiny", "--unproved", "--name", "vectors", "--task", "embed", "--context", "256"
    )
    assert done.returncode == 0, done.stderr
    opened = cli.dashboard()
    bearer = {"Authorization": f"Bearer {opened['token']}"}
    with http(opened["address"]) as client:
        csrf = client.get("/api/session", headers=bearer).json()["csrf"]
        answer = client.post(
            "/api/playground/vectors/embed",
            json={"input": ["hello there", "general kenobi"]},
            headers={**bearer, "X-Nodeau-CSRF": csrf},
        )
    assert answer.status_code == 200, answer.text
    said = answer.json()
    assert said["answered_by"]["artifact"] == artifact_of(cli, "vectors")
    assert said["request"] == {"model": "vectors", "input": ["hello there", "general kenobi"]}
    vectors = [d["embedding"] for d in said["response"]["data"]]
    assert [len(v) for v in vectors] == [64, 64] and vectors[0] != vectors[1]
    assert "client.embeddings.create(" in said["snippets"]["python"]


@pytest.mark.slow
def test_the_models_section_says_what_model_info_says_for_each_capability(
    cli: Cli, tmp_path: Path
) -> None:
    # one model qualified (the random tiny llama fails what it is asked), one never
    tiny = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(tiny), "--alias", "tiny").returncode == 0
    other = write_tiny_llama(tmp_path / "other.gguf", seed=4)
    assert cli("models", "import", str(other), "--alias", "other").returncode == 0
    done = cli("model", "qualify", "tiny", "--context", "512", "--seed", "0", "--json")
    assert done.returncode == 0, done.stderr

    opened = cli.dashboard()
    bearer = {"Authorization": f"Bearer {opened['token']}", **FRESH}
    with http(opened["address"]) as client:
        board = whole_board(client, bearer)
    section = board["qualification"]
    said = {}
    for model in ("tiny", "other"):
        info = cli.json("model", "info", model)
        assert isinstance(info, dict)
        [kept] = [m for m in board["cli"]["model_info"] if m["artifact_id"] == info["artifact_id"]]
        assert kept["names"] == [model]
        assert kept["capabilities"] == info["capabilities"]  # state and evidence, word for word
        assert kept["qualified"] == info["qualified"]
        [i] = [i for i, r in enumerate(section["rows"]) if r[0] == model]
        capabilities = [c["capability"] for c in info["capabilities"]]
        assert section["headers"] == ["MODEL", "ARTIFACT", "QUALIFIED", *capabilities]
        assert section["rows"][i] == [
            model, info["artifact_id"][:12], info["qualified"] or "never",
            *(c["state"] for c in info["capabilities"]),
        ]  # fmt: skip
        assert section["evidence"][i][3:] == [c["evidence"] for c in info["capabilities"]]
        said[model] = {c["state"] for c in info["capabilities"]}
    assert "failed" in said["tiny"] and "never qualified" not in said["tiny"]
    assert said["other"] == {"never qualified"}
