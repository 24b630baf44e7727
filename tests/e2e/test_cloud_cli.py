"""Nodeau Cloud end to end: the installed ``nodeau``, real model servers, the fake cloud.

Proves no prompt, answer or embedding reaches the cloud, an outage changes nothing serving,
no command opens a non-loopback connection with the cloud off, and bad input is one line.
Cards are simulated (models on the CPU); every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from gguf import GGUFValueType, Keys

from tests.support.builders.entitlements import document
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_cloud import FakeCloud, running_fake_cloud
from tests.support.real.cli import NODEAU
from tests.support.real.cli import Cli as BaseCli
from tests.support.real.llama import llama_server_binary

DEADLINE_S = 120.0
INTERVAL_S = "0.5"  # reports and operation polls, for the test's sake (default: 300 s and 30 s)


class Cli(BaseCli):
    def __init__(self, home: Path, **settings: str) -> None:
        super().__init__(home, NODEAU_SIMULATED_GPUS="3 x 24 GiB", **settings)

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, f"nodeau {' '.join(args)}: {done.stderr}"
        return done.stdout

    def status(self) -> dict[str, Any]:
        shown: dict[str, Any] = json.loads(self.ok("cloud", "status", "--json"))
        return shown


def wait_for(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        assert time.monotonic() < deadline, f"waited too long for {what}"
        time.sleep(0.1)


def endpoint_of(cli: Cli, name: str) -> str:
    [row] = [r for r in json.loads(cli.ok("ps", "--json")) if r["name"] == name]
    endpoint: str = row["endpoint"]
    return endpoint


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Cli]:
    """A chat model ``tiny`` and an embedding model ``vectors`` serving, with the cloud off."""
    llama_server_binary()  # a failure, never a skip, when there is none
    cli = Cli(
        tmp_path / "home",
        NODEAU_CLOUD_REPORT_INTERVAL_S=INTERVAL_S,
        NODEAU_CLOUD_POLL_INTERVAL_S=INTERVAL_S,
        NODEAU_CLOUD_TIMEOUT_S="1",
    )
    chat = write_tiny_llama(tmp_path / "chat.gguf", seed=3, quant="q8_0")
    pooling = {Keys.LLM.POOLING_TYPE.format(arch="llama"): (1, GGUFValueType.UINT32)}
    vectors = write_tiny_llama(tmp_path / "vectors.gguf", seed=5, override_keys=pooling)
    cli.ok("models", "import", str(chat), "--alias", "tiny")
    cli.ok("models", "import", str(vectors), "--alias", "tinyvec")
    cli.ok("run", "tiny", "--unproved", "--context", "256")
    cli.ok("run", "tinyvec", "--unproved", "--name", "vectors", "--task", "embed")
    yield cli
    cli("cloud", "disconnect")
    for row in json.loads(cli("batch", "status", "--json").stdout or "[]"):
        cli("batch", "stop", row["name"])
    for row in json.loads(cli("ps", "--json").stdout or "[]"):
        cli("stop", row["name"], "--workload")


def forms(text: str) -> set[bytes]:
    """``text`` as it could appear in bytes sent: UTF-8, and escaped inside JSON."""
    return {
        text.encode(),
        json.dumps(text)[1:-1].encode(),
        json.dumps(text, ensure_ascii=False)[1:-1].encode(),
    }


@pytest.mark.slow
def test_what_you_compute_never_leaves_and_an_outage_changes_nothing(
    served: Cli, tmp_path: Path
) -> None:
    cli = served
    fake = FakeCloud()
    with running_fake_cloud(fake) as url:
        connected = cli("cloud", "connect", "--url", url, "--fleet", "--allow", "stop-batch")
        assert connected.returncode == 0, connected.stderr
        assert "Prompts, completions, embeddings, images and batch records never leave." in (
            connected.stdout
        )

        nonces: list[str] = []
        secrets_out: list[str] = []  # what the models computed

        def nonce() -> str:
            nonces.append(f"nonce-{secrets.token_hex(12)}")
            return nonces[-1]

        chat = openai.OpenAI(base_url=endpoint_of(cli, "tiny"), api_key="unused", timeout=60)
        for _ in range(4):
            answer = chat.chat.completions.create(
                model="tiny",
                messages=[{"role": "user", "content": f"Repeat {nonce()} and {nonce()}"}],
                max_tokens=12,
            )
            secrets_out.append(answer.choices[0].message.content or "")
        embed = openai.OpenAI(base_url=endpoint_of(cli, "vectors"), api_key="unused", timeout=60)
        vectors = embed.embeddings.create(model="vectors", input=[nonce(), nonce()])
        floats = [v for d in vectors.data for v in d.embedding[:8]]

        lines = [
            json.dumps(
                {
                    "custom_id": nonce(),
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "tiny",
                        "messages": [{"role": "user", "content": f"Say {nonce()}"}],
                        "max_tokens": 12,
                    },
                }
            )
            for _ in range(3)
        ]
        jobs = tmp_path / "jobs.jsonl"
        jobs.write_text("\n".join(lines) + "\n", encoding="utf-8")
        cli.ok("batch", "submit", str(jobs), "--model", "tiny", "--unproved", "--name", "job1")
        wait_for(
            "the batch job",
            lambda: json.loads(cli.ok("batch", "status", "job1", "--json"))["state"] == "succeeded",
        )
        for line in cli.ok("batch", "results", "job1").splitlines():
            body = json.loads(line)["response"]["body"]
            secrets_out.append(body["choices"][0]["message"]["content"] or "")
        after_work = fake.report_count()
        wait_for("two reports after the work", lambda: fake.report_count() >= after_work + 2)

        received = fake.received
        assert len(received) > 0 and b"POST /v1/installations/" in received
        # the reports are real: they name the workloads and the machine
        last = fake.reports[-1]
        assert {w["name"] for w in last["workloads"]} >= {"tiny", "vectors"}
        assert last["machines"][0]["machine"] == "testbox"
        for text in nonces:
            for form in forms(text):
                assert form not in received, f"a nonce left: {text}"
        long_enough = [t for t in secrets_out if len(t.strip()) >= 8]
        assert long_enough, f"no completion long enough to search for: {secrets_out!r}"
        for text in long_enough:
            for form in forms(text.strip()):
                assert form not in received, f"a completion left: {text!r}"
        for value in (v for v in floats if abs(v) >= 1e-3):
            assert repr(value).encode() not in received, f"an embedding value left: {value}"

        # -- an outage: 500s, then answers slower than the timeout
        before_ps = [(r["name"], r["state"], r["gpu"]) for r in json.loads(cli.ok("ps", "--json"))]
        before_plan = json.loads(cli.ok("plan", "--json"))
        failed_before = cli.status()["totals"]["failed"]
        fake.mode = "error"
        wait_for("two failed calls", lambda: cli.status()["totals"]["failed"] >= failed_before + 2)
        fake.mode = "slow"
        wait_for(
            "a call that timed out",
            lambda: any("timed out" in (c["failure"] or "") for c in cli.status()["calls"]),
        )
        shown = cli.ok("cloud", "status", "--all")
        assert "failed: answered 500" in shown and "failed: timed out after 1 s" in shown
        after_ps = [(r["name"], r["state"], r["gpu"]) for r in json.loads(cli.ok("ps", "--json"))]
        assert after_ps == before_ps  # nothing stopped, nothing moved
        still = chat.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "still there?"}], max_tokens=2
        )
        assert still.choices[0].message is not None
        after_plan = json.loads(cli.ok("plan", "--json"))
        assert (after_plan["plan"], after_plan["reason"]) == (
            before_plan["plan"],
            before_plan["reason"],
        )
        assert not any(
            m["drained"] for m in json.loads(cli.ok("fleet", "list", "--json"))["machines"]
        )
        fake.mode = "ok"
        back = fake.report_count()
        wait_for("reports again once the cloud is back", lambda: fake.report_count() > back)

        done = cli.ok("cloud", "disconnect")
        assert "the association and its credential are forgotten" in done
        status = cli.status()
        assert status["connected"] is False and status["reporter_pid"] is None
        assert status["totals"]["calls"] == len(status["calls"]) > 0


def test_bad_input_is_one_line_and_nothing_is_kept(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    for args, said in [
        (("--fleet", "--allow", "shell"), "--allow: 'shell' is not an operation; choose from"),
        (("--allow", "drain"), "--allow needs --fleet"),
        (("--url", "ftp://cloud.example"), "--url must be an https:// URL"),
        (("--url", "http://cloud.example"), "--url must be https:// (plain http:// is only for"),
    ]:
        done = cli("cloud", "connect", *args)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.startswith(f"nodeau: {said}") and done.stderr.count("\n") == 1
    slow = Cli(tmp_path / "home", NODEAU_CLOUD_TIMEOUT_S="soon")
    done = slow("cloud", "connect")
    assert done.stderr == (
        "nodeau: NODEAU_CLOUD_TIMEOUT_S must be a number of seconds above zero, got 'soon'\n"
    )
    off = cli("cloud", "status")
    assert off.returncode == 0
    assert off.stdout.startswith("Nodeau Cloud: not connected (off: nothing reaches out)\n")
    assert "calls: 0 (0 failed)" in off.stdout
    alone = cli("cloud", "run", "--once")
    assert alone.returncode == 1
    assert alone.stderr == (
        "nodeau: not connected as a fleet: run nodeau cloud connect --fleet first\n"
    )
    assert not (tmp_path / "home" / "cloud" / "association.json").exists()


def test_an_installed_nodeau_refuses_an_entitlement_signed_by_a_key_it_does_not_know(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path / "home")
    fake = FakeCloud(document)
    with running_fake_cloud(fake) as url:
        done = cli("cloud", "connect", "--url", url)
    assert done.returncode == 2, done.stderr
    assert "The entitlement from Nodeau Cloud was not installed (unknown-key)." in done.stdout
    assert done.stderr.startswith("nodeau: entitlement.unknown-key: ")
    plan = json.loads(cli.ok("plan", "--json"))
    assert (plan["plan"], plan["reason"], plan["source"]) == ("home", "none-present", None)


# -- no egress with the cloud off

CONNECT = re.compile(r"^\d+\s+connect\(\d+, \{sa_family=(?P<family>AF_\w+)(?P<rest>.*)$")
LOOPBACK = re.compile(r'inet_addr\("127\.|inet_pton\(AF_INET6, "(::1|::ffff:127\.)')

REQUEST = """
import json, sys, openai
[row] = [r for r in json.load(open(sys.argv[1])) if r["name"] == "tiny"]
client = openai.OpenAI(base_url=row["endpoint"], api_key="unused", timeout=60, max_retries=0)
answer = client.chat.completions.create(
    model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=4
)
print("answered:", answer.choices[0].message.content is not None)
"""


CONTROL = (
    "import socket; s = socket.socket();"
    " print('control:', s.connect_ex(('192.0.2.1', 443)) != 0); s.close()"
)


def needs(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        pytest.fail(
            f"{program} is needed for the no-egress test (Debian: apt-get install {program})"
        )
    return found


@pytest.mark.slow
def test_with_the_cloud_off_no_command_opens_any_connection_but_loopback(tmp_path: Path) -> None:
    llama_server_binary()
    strace, unshare, ip = needs("strace"), needs("unshare"), needs("ip")
    cli = Cli(tmp_path / "home")
    chat = write_tiny_llama(tmp_path / "chat.gguf", seed=3, quant="q8_0")
    (tmp_path / "request.py").write_text(REQUEST, encoding="utf-8")
    python = NODEAU.parent / "python"
    script = "\n".join(
        [
            "set -e",
            f'N="{NODEAU}"',
            f'"$N" models import {chat} --alias tiny',
            '"$N" run tiny --unproved --context 256',
            f'"$N" ps --json > {tmp_path}/ps.json',
            '"$N" ps',
            '"$N" plan',
            '"$N" fleet list',
            '"$N" environment',
            '"$N" cloud status',
            f'"{python}" {tmp_path}/request.py {tmp_path}/ps.json',
            '"$N" stop tiny',
            '"$N" stop tiny --workload',
            '"$N" ps',
            # the control: one attempt the trace must catch (TEST-NET-1, no route here)
            f'"{python}" -c "{CONTROL}"',
        ]
    )
    (tmp_path / "commands.sh").write_text(script + "\n", encoding="utf-8")
    trace = tmp_path / "connect.trace"
    inner = (
        f"{ip} link set lo up && exec {strace} -f -qq -e trace=connect -e signal=none"
        f" -o {trace} sh {tmp_path}/commands.sh"
    )
    env = {k: v for k, v in cli.env.items() if not k.startswith("NODEAU_CLOUD")}
    try:
        done = subprocess.run(
            [unshare, "--net", "--", "sh", "-c", inner],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        cli("stop", "tiny", "--workload")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "answered: True" in done.stdout

    attempts = [m for m in map(CONNECT.match, trace.read_text().splitlines()) if m]
    inet = [m for m in attempts if m["family"] in ("AF_INET", "AF_INET6")]
    assert inet, "no TCP connection was traced at all (the request went through loopback)"
    outside = [m.group(0) for m in inet if not LOOPBACK.search(m["rest"])]
    # the control's one attempt is caught, and the commands made none
    assert "control: True" in done.stdout
    assert len(outside) == 1 and 'inet_addr("192.0.2.1")' in outside[0], outside[:5]
    assert {m["family"] for m in attempts} <= {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}
    assert not os.path.exists(tmp_path / "home" / "cloud" / "calls.jsonl")
