"""The dashboard in headless chromium: each card's memory bar (the ledger's reservation
against the total, the card's own reading only where one exists), the Playground's chat as
turns sent whole with a system prompt and a temperature (through a real llama-server, the
``curl`` and ``openai`` equivalents run as shown), and moments in the reader's own locale
and time zone. Screenshots as tests/e2e/test_dashboard_browser.py saves them."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from nodeau.apps.cli.render import size
from nodeau.apps.copies.commands import CopyListing
from nodeau.apps.dashboard import cards
from nodeau.apps.dashboard.traffic import totals
from nodeau.apps.machines.commands import GpuView
from nodeau.apps.recovery.commands import RecoveryListing
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from tests.support.builders.dashboard_views import GIB, NOW, FakePlane, fleet, machine, plan
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.browser import Page, chromium, off_loopback
from tests.support.real.dashboard_cli import Cli, leave_nothing
from tests.support.real.dashboard_page import render_all, screenshot_of, served, shots

MIB = 1024**2
SYSTEM = "Answer in one word."
# an ISO moment as Python writes one, which the page must never show as it is
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


@pytest.fixture
def browser() -> Iterator[Callable[[], Page]]:
    with chromium() as new_page:
        yield new_page


def fake_plane(*machines: Any, **views: Any) -> FakePlane:
    given: dict[str, Any] = {
        "machines": fleet(*machines), "workloads": (), "batches": (),
        "copies": CopyListing(plane="p", copies=()),
        "recovery": RecoveryListing(plane="p", control_plane="none", services=()),
        "plan": plan(), **views,
    }  # fmt: skip
    return FakePlane(**given)


def memory_shown(page: Page, machine_name: str) -> list[dict[str, Any]]:
    """Each card's MEMORY cell on ``machine_name``: its bar's parts (their widths, percent
    of the card's total) and its two figures."""
    found: list[dict[str, Any]] = page.evaluate(
        "Array.from(document.querySelectorAll("
        f"'#hardware .machine[data-machine=\"{machine_name}\"] tbody tr')).map(tr => {{"
        " const td = tr.querySelector('td[data-column=\"MEMORY\"]');"
        " const part = (c) => { const s = td.querySelector('.bar .' + c);"
        "   return s ? parseFloat(s.style.width) : null; };"
        " return {gpu: tr.children[0].textContent,"
        "   reserved_column: tr.querySelector('td[data-column=\"RESERVED\"]').textContent,"
        "   reserved_bar: part('reserved'), used_bar: part('used'),"
        "   reserved: td.querySelector('[data-figure=\"reserved\"]').textContent,"
        "   used: td.querySelector('[data-figure=\"used\"]').textContent}; })"
    )
    return found


def reading_shown(page: Page, machine_name: str) -> str:
    said: str = page.evaluate(
        f'document.querySelector(\'#hardware .machine[data-machine="{machine_name}"]'
        " .reading').textContent"
    )
    return said


def test_each_card_shows_its_ledger_reservation_against_its_total_and_its_own_reading_apart(
    tmp_path: Path, browser: Callable[[], Page]
) -> None:
    here = machine("box-a")  # GPU-1 held by chat, 3 GiB of 24; GPU-2 free
    simulated = machine(
        "box-s",
        simulated=True,
        gpus=(GpuView(uuid="GPU-S1", model="Simulated GPU (24 GiB)", total_bytes=24 * GIB,
                      held_by="big", reserved_bytes=18 * GIB),),
    )  # fmt: skip

    def read_here() -> MachineReading:
        # what NVML says on box-a: 19 GiB of GPU-1 free (5 GiB in use), 512 MiB used on GPU-2
        return MachineReading(
            machine="box-a",
            gpus=tuple(
                GpuReading(gpu=Gpu(uuid=u, model="L4", total_bytes=24 * GIB), free_bytes=f,
                           driver_version="550")
                for u, f in (("GPU-1", 19 * GIB), ("GPU-2", 24 * GIB - 512 * MIB))
            ),
            simulated=False,
            note="2 NVIDIA GPUs",
        )  # fmt: skip

    with served(fake_plane(here, simulated), tmp_path, cards=read_here) as address:
        page = browser()
        page.open(f"{address}/?token=t0ken")
        page.wait_for("document.querySelectorAll('#hardware td[data-column=\"MEMORY\"]')"
                      ".length === 3")  # fmt: skip
        assert memory_shown(page, "box-a") == [
            {"gpu": "GPU-1", "reserved_column": "3.00 GiB",
             "reserved_bar": 12.5, "used_bar": 20.83,
             "reserved": "reserved 3.00 GiB of 24.00 GiB (Nodeau's ledger)",
             "used": "in use 5.00 GiB (the card's own reading)"},
            {"gpu": "GPU-2", "reserved_column": "-",
             "reserved_bar": 0, "used_bar": 2.08,
             "reserved": "reserved 0 B of 24.00 GiB (Nodeau's ledger)",
             "used": "in use 512.00 MiB (the card's own reading)"},
        ]  # fmt: skip
        assert reading_shown(page, "box-a") == cards.READ_HERE
        # a simulated card: its reservation drawn, no reading drawn or written, and why
        assert memory_shown(page, "box-s") == [
            {"gpu": "GPU-S1 (simulated)", "reserved_column": "18.00 GiB",
             "reserved_bar": 75, "used_bar": None,
             "reserved": "reserved 18.00 GiB of 24.00 GiB (Nodeau's ledger)",
             "used": "in use: no reading"},
        ]  # fmt: skip
        assert reading_shown(page, "box-s") == cards.SIMULATED
        legend = page.evaluate("document.querySelector('#hardware .legend').textContent")
        assert "reserved: Nodeau's ledger" in legend and "the card's own reading" in legend
        screenshot_of(page, "hardware", shots(tmp_path) / "dashboard-card-memory.png")
        assert page.errors() == []
        assert off_loopback(page.requested_urls()) == []


# -- moments in the reader's own locale and time zone

REPORTED = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
VALID = (datetime(2026, 1, 1, 0, 0, tzinfo=UTC), datetime(2027, 1, 1, 0, 0, 0, 654321, tzinfo=UTC))
READ_AT = NOW + timedelta(microseconds=987654)


def german(moment: datetime, offset: timedelta) -> str:
    """``moment`` as de-DE writes a date and time (``toLocaleString``) at UTC+``offset``."""
    local = moment + offset
    return f"{local.day}.{local.month}.{local.year}, " + local.strftime("%H:%M:%S")


def american(moment: datetime, offset: timedelta) -> str:
    """``moment`` as en-US writes it, at UTC+``offset``."""
    local = moment + offset
    return f"{local.month}/{local.day}/{local.year}, " + local.strftime("%I:%M:%S %p").lstrip("0")


@pytest.mark.parametrize(
    ("locale", "zone", "offset", "written"),
    [
        ("de-DE", "Asia/Kolkata", timedelta(hours=5, minutes=30), german),
        ("en-US", "America/Bogota", timedelta(hours=-5), american),  # no summer time there
    ],
)
def test_moments_are_shown_in_the_readers_locale_and_time_zone_with_the_iso_text_kept(
    tmp_path: Path,
    browser: Callable[[], Page],
    locale: str,
    zone: str,
    offset: timedelta,
    written: Callable[[datetime, timedelta], str],
) -> None:
    entitled = plan(accepted=True, reason="accepted", plan="pro", sentence="The Pro plan applies.",
                    not_before=VALID[0], expires_at=VALID[1])  # fmt: skip
    board_plane = fake_plane(machine("box-a", reported_at=REPORTED), plan=entitled)
    with served(board_plane, tmp_path, now=READ_AT) as address:
        page = browser()
        page.call("Emulation.setLocaleOverride", locale=locale)
        page.call("Emulation.setTimezoneOverride", timezoneId=zone)
        page.open(f"{address}/?token=t0ken")
        page.wait_for("document.querySelectorAll('#plan .lines li').length > 0")

        def times(selector: str) -> list[list[str]]:
            found: list[list[str]] = page.evaluate(
                f"Array.from(document.querySelectorAll('{selector} time')).map(t =>"
                " [t.textContent.replace(/\\u202f/g, ' '), t.dateTime, t.title])"
            )
            return found

        last_report = REPORTED.isoformat()
        assert last_report == "2026-11-30T12:00:00.123456+00:00"  # what the board sends
        assert times("#hardware .machine dd") == [
            [written(REPORTED, offset), last_report, last_report]
        ]
        # inside a sentence too: the plan's "valid: from ... until ..."
        assert times("#plan .lines") == [
            [written(v, offset), v.isoformat(), v.isoformat()] for v in VALID
        ]
        valid = page.evaluate(
            "Array.from(document.querySelectorAll('#plan .lines li')).map(li => li.textContent)"
            ".find(t => t.startsWith('valid:'))"
        ).replace("\u202f", " ")
        assert valid == f"valid: from {written(VALID[0], offset)} until {written(VALID[1], offset)}"
        assert page.evaluate("document.querySelector('#live').title") == (
            "read at " + READ_AT.isoformat()
        )
        render_all(page)
        shown_text = page.evaluate("document.querySelector('main').innerText")
        assert ISO.findall(shown_text) == []  # no moment is left as the board's ISO text
        screenshot_of(page, "hardware", shots(tmp_path) / f"dashboard-local-times-{locale}.png")
        assert page.errors() == []


# -- the Playground's conversation, through a real llama-server


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """A chat service ``tiny`` serving a tiny model on simulated cards ("2 x 24 GiB"), and
    the dashboard; both stopped after the module's tests."""
    folder = tmp_path_factory.mktemp("serving")
    c = Cli(folder / "home")
    try:
        path = write_tiny_llama(folder / "tiny.gguf", seed=3, quant="q8_0")
        assert c("models", "import", str(path), "--alias", "tiny").returncode == 0
        started = c("run", "tiny", "--unproved", "--context", "512")
        assert started.returncode == 0, started.stderr
        yield c
    finally:
        leave_nothing(c)


def chat_bodies(page: Page) -> list[dict[str, Any]]:
    """The body of each chat request the page sent its server, from the browser's own
    network log."""
    page.pump(0.1)
    found = []
    for e in page.events:
        if e["method"] != "Network.requestWillBeSent":
            continue
        request = e["params"]["request"]
        if not request["url"].endswith("/api/playground/tiny/chat"):
            continue
        data = request.get("postData")
        if data is None:
            data = page.call("Network.getRequestPostData", requestId=e["params"]["requestId"])[
                "postData"
            ]
        found.append(json.loads(data))
    return found


def turns_shown(page: Page) -> list[dict[str, str]]:
    found: list[dict[str, str]] = page.evaluate(
        "Array.from(document.querySelectorAll('#pg-turns .turn')).map(li =>"
        " ({role: li.dataset.role, content: li.querySelector('.content').textContent}))"
    )
    return found


def send(page: Page, text: str) -> None:
    """Type ``text`` and send it; wait until its answer has streamed to its end."""
    page.evaluate(
        f"document.querySelector('#pg-chat-text').value = {json.dumps(text)};"
        " document.querySelector('#pg-chat button[type=submit]').click(); true"
    )
    page.wait_for("document.querySelector('#pg-turns').dataset.done === 'yes'")
    assert page.evaluate("document.querySelector('#pg-error').hidden"), page.evaluate(
        "document.querySelector('#pg-error').textContent"
    )


@pytest.mark.slow
def test_a_conversation_is_sent_whole_with_its_system_prompt_and_temperature_as_turns(
    serving: Cli, tmp_path: Path, browser: Callable[[], Page]
) -> None:
    cli = serving
    listed: list[dict[str, Any]] = cast(list[dict[str, Any]], cli.json("ps"))
    endpoint = next(str(row["endpoint"]) for row in listed if row["name"] == "tiny")

    def served_requests() -> int:
        counted = totals("tiny", httpx.get(endpoint.removesuffix("/v1") + "/metrics").text)
        assert counted.requests is not None
        return counted.requests

    opened = cli.dashboard()
    page = browser()
    page.open(opened["url"])
    page.wait_for(
        "Array.from(document.querySelector('#pg-target').options).some(o => o.value === 'tiny')"
    )
    page.evaluate(
        "const s = document.querySelector('#pg-target'); s.value = 'tiny';"
        " s.dispatchEvent(new Event('change')); true"
    )
    page.wait_for("!document.querySelector('#pg-chat').hidden")
    page.evaluate(
        f"document.querySelector('#pg-chat-system').value = {json.dumps(SYSTEM)};"
        " const t = document.querySelector('#pg-chat-temperature'); t.value = '0.3';"
        " t.dispatchEvent(new Event('input'));"
        " document.querySelector('#pg-chat-tokens').value = '8'; true"
    )
    assert page.evaluate("document.querySelector('#pg-chat-temperature-shown').textContent") == (
        "0.3"
    )
    before = served_requests()

    send(page, "hello")
    send(page, "and again?")
    first, second = turns_shown(page)[1], turns_shown(page)[3]
    assert turns_shown(page) == [
        {"role": "user", "content": "hello"}, first,
        {"role": "user", "content": "and again?"}, second,
    ]  # fmt: skip
    assert first["role"] == second["role"] == "assistant"
    system = {"role": "system", "content": SYSTEM}
    conversation = [system, {"role": "user", "content": "hello"}, first,
                    {"role": "user", "content": "and again?"}]  # fmt: skip
    # each message went with the system prompt and every turn before it, at that temperature
    assert chat_bodies(page) == [
        {"messages": conversation[:2], "max_tokens": 8, "temperature": 0.3},
        {"messages": conversation, "max_tokens": 8, "temperature": 0.3},
    ]
    assert served_requests() == before + 2  # the endpoint answered each once

    # the equivalents shown are the second request, and each, run as shown, is answered
    curl = page.evaluate("document.querySelector('#pg-curl').textContent")
    python = page.evaluate("document.querySelector('#pg-python').textContent")
    words = shlex.split(curl.replace("\\\n", " "))
    sent = {"model": "tiny", "messages": conversation, "stream": True, "max_tokens": 8,
            "temperature": 0.3}  # fmt: skip
    assert words[2] == endpoint + "/chat/completions"
    assert json.loads(words[words.index("-d") + 1]) == sent
    page.evaluate("document.querySelector('#pg-code').open = true; true")
    screenshot_of(page, "playground", shots(tmp_path) / "dashboard-playground-turns.png")
    ran = subprocess.run(
        ["bash", "-c", curl], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0 and "data:" in ran.stdout, ran.stderr
    ran = subprocess.run(
        [sys.executable, "-c", python], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert served_requests() == before + 4

    # start over: the next message goes with the system prompt alone
    page.evaluate("document.querySelector('#pg-chat-reset').click(); true")
    assert turns_shown(page) == []
    send(page, "fresh")
    assert chat_bodies(page)[2:] == [
        {"messages": [system, {"role": "user", "content": "fresh"}], "max_tokens": 8,
         "temperature": 0.3}
    ]  # fmt: skip
    assert [t["content"] for t in turns_shown(page)][:1] == ["fresh"]
    assert served_requests() == before + 5
    assert page.errors() == []
    assert off_loopback(page.requested_urls()) == []


@pytest.mark.slow
def test_a_real_run_on_simulated_cards_shows_each_reservation_and_no_reading(
    serving: Cli, browser: Callable[[], Page]
) -> None:
    cli = serving
    listed = cast(dict[str, Any], cli.json("fleet", "list"))
    [gpus] = [m["gpus"] for m in listed["machines"]]
    opened = cli.dashboard()
    page = browser()
    page.open(opened["url"])
    page.wait_for("document.querySelectorAll('#hardware td[data-column=\"MEMORY\"]')"
                  ".length === 2")  # fmt: skip
    shown = memory_shown(page, "testbox")
    held = [g for g in gpus if g["held_by"] == "tiny"]
    assert len(held) == 1 and held[0]["reserved_bytes"] > 0
    for g, cell in zip(gpus, shown, strict=True):
        assert cell["gpu"] == g["uuid"] + " (simulated)"
        assert cell["reserved"] == (
            f"reserved {size(g['reserved_bytes'])} of 24.00 GiB (Nodeau's ledger)"
        )
        assert cell["used"] == "in use: no reading" and cell["used_bar"] is None
        if g["held_by"] == "tiny":  # the table's RESERVED column says the same figure
            assert cell["reserved"].split(" of ")[0] == "reserved " + cell["reserved_column"]
    assert reading_shown(page, "testbox") == cards.SIMULATED
    assert page.errors() == []
