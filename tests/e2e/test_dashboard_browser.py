"""The dashboard the installed ``nodeau dashboard`` serves, in a real headless chromium.

Its views say what ``nodeau ps --json`` says; it stops a batch job, streams a Playground answer
and asks nothing of any host but 127.0.0.1. Screenshots go under ``$NODEAU_SCREENSHOTS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nodeau.apps.copies.commands import CopyListing
from nodeau.apps.dashboard.traffic import totals
from nodeau.apps.recovery.commands import RecoveryListing
from nodeau.ports.errors import NodeauError
from tests.support.builders.dashboard_views import FakePlane, fleet, machine, plan, workload
from tests.support.real.browser import Page, chromium, off_loopback
from tests.support.real.dashboard_cli import (
    Cli,
    artifact_of,
    leave_nothing,
    same_moment,
    serve_and_submit,
)
from tests.support.real.dashboard_page import render_all, screenshot_of, served, shots

SECTIONS = ("alerts", "hardware", "workloads", "models", "recovery", "plan", "playground")


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home")
    yield c
    leave_nothing(c)


@pytest.fixture
def browser() -> Iterator[Callable[[], Page]]:
    with chromium() as new_page:
        yield new_page


def sentences_shown(page: Page) -> dict[str, str]:
    """The NOW column of the page's workloads table, by workload name."""
    found: dict[str, str] = page.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll("
        "'#workloads > .table tbody tr')).map(tr => [tr.dataset.name, "
        "tr.querySelector('td[data-column=\"NOW\"]').textContent]))"
    )
    return found


@pytest.mark.slow
def test_the_page_says_what_ps_says_stops_a_batch_job_and_streams_an_answer(
    cli: Cli, tmp_path: Path, browser: Callable[[], Page]
) -> None:
    serve_and_submit(cli, tmp_path)
    opened = cli.json("dashboard")
    page = browser()
    page.open(opened["url"])
    assert page.evaluate("location.href") == opened["address"] + "/"  # the token is gone
    page.wait_for("document.querySelectorAll('#workloads > .table tbody tr').length === 2")

    # the state sentences are the ones `nodeau ps --json` gives: a sentence says how long ago,
    # so the page is read between two `ps` and must say what they say, its ages between theirs
    def ps_sentences() -> dict[str, str]:
        return {row["name"]: row["sentence"] for row in cli.json("ps")}

    def page_sentences() -> dict[str, str]:
        page.evaluate("refresh(true)")  # a fresh read, not the board kept since the last poll
        return sentences_shown(page)

    expected, _shown = same_moment(ps_sentences, page_sentences, lambda said: said)
    assert set(expected) == {"tiny", "long"}
    assert page.evaluate("document.querySelector('#live').dataset.state") == "live"
    held = page.evaluate(
        "Array.from(document.querySelectorAll('#hardware td[data-column=\"HELD BY\"]'))"
        ".map(td => td.textContent).sort()"
    )
    assert held == ["long", "tiny"]
    # the Models section's qualification says what `nodeau model info --json` says
    info = cli.json("model", "info", "tiny")
    shown_states = page.evaluate(
        "Array.from(document.querySelectorAll('#qualification tbody tr')).filter(tr =>"
        " tr.children[0].textContent === 'tiny').map(tr => Array.from(tr.children)"
        ".slice(3).map(td => [td.textContent, td.title]))"
    )
    assert shown_states == [[[c["state"], c["evidence"]] for c in info["capabilities"]]]
    folder = shots(tmp_path)
    render_all(page)
    page.screenshot(folder / "dashboard.png")
    for section in SECTIONS:
        screenshot_of(page, section, folder / f"dashboard-{section}.png")

    # the one action: stop the batch job from its button
    page.evaluate("window.confirm = () => true; true")
    page.evaluate("document.querySelector('[data-stop=\"long\"]').click(); true")
    said = page.wait_for(
        "(t => t.includes('stopped') && t)(document.querySelector('#batches .said').textContent)"
    )
    assert said.startswith("long")
    page.wait_for("!document.querySelector('[data-stop=\"long\"]')")
    state = page.wait_for(
        "(td => td && td.textContent === 'stopped' && td.textContent)(document.querySelector("
        '\'#batches tr[data-name="long"] td[data-column="STATE"]\'))'
    )
    assert state == cli.json("batch", "status", "long")["state"] == "stopped"
    page.wait_for("document.querySelectorAll('#workloads > .table tbody tr').length === 1")

    # the Playground streams a real answer and says who gave it
    page.wait_for(
        "Array.from(document.querySelector('#pg-target').options).some(o => o.value === 'tiny')"
    )
    page.evaluate(
        "const s = document.querySelector('#pg-target'); s.value = 'tiny';"
        " s.dispatchEvent(new Event('change')); true"
    )
    page.wait_for("!document.querySelector('#pg-chat').hidden")
    page.evaluate(
        "document.querySelector('#pg-chat-text').value = 'hello';"
        " document.querySelector('#pg-chat-tokens').value = '8';"
        " document.querySelector('#pg-chat button').click(); true"
    )
    page.wait_for("document.querySelector('#pg-turns').dataset.done === 'yes'")
    turns = page.evaluate(
        "Array.from(document.querySelectorAll('#pg-turns .turn')).map(li =>"
        " [li.dataset.role, li.querySelector('.content').textContent])"
    )
    assert [role for role, _ in turns] == ["user", "assistant"] and turns[0][1] == "hello"
    assert turns[1][1]  # the streamed answer, shown as the model's turn
    fields = page.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#pg-answered dd'))"
        ".map(dd => [dd.dataset.field, dd.textContent]))"
    )
    assert fields["artifact"] == artifact_of(cli, "tiny")
    assert (fields["workload"], fields["model"], fields["machine"]) == ("tiny", "tiny", "testbox")
    curl = page.evaluate("document.querySelector('#pg-curl').textContent")
    assert fields["endpoint"] + "/chat/completions" in curl
    assert "from openai import OpenAI" in page.evaluate(
        "document.querySelector('#pg-python').textContent"
    )
    page.evaluate("document.querySelector('#pg-code').open = true; true")
    screenshot_of(page, "playground", folder / "dashboard-playground-answered.png")

    # the Traffic table says what the endpoint's own /metrics counted: the Playground's ask
    page.evaluate("refresh(true)")
    shown = page.wait_for(
        "(td => td && td.textContent !== '0' && td.textContent)(document.querySelector("
        '\'#traffic tr[data-name="tiny"] td[data-column="REQUESTS"]\'))'
    )
    endpoint = next(row["endpoint"] for row in cli.json("ps") if row["name"] == "tiny")
    counted = totals("tiny", httpx.get(endpoint.removesuffix("/v1") + "/metrics").text)
    assert counted.requests is not None and int(shown) == counted.requests >= 1

    # nothing asked of any other host, not even the workload's endpoint: its own origin only
    urls = page.requested_urls()
    assert urls and off_loopback(urls) == []
    assert [u for u in urls if not u.startswith(opened["address"] + "/")] == []
    assert page.errors() == []


def test_a_machine_with_no_figures_renders_unknown_without_an_error(
    tmp_path: Path, browser: Callable[[], Page]
) -> None:
    silent = machine(
        "box-q", "unreachable", simulated=None, reported_at=None, health_sentence=None, gpus=()
    )
    plane = FakePlane(
        machines=fleet(machine("box-a"), silent),
        workloads=(workload("w", machine=None, gpu=None, since=None, endpoint=None),),
        batches=(),
        copies=NodeauError("copies are kept between the machines of a fleet"),
        recovery=NodeauError("the cluster did not answer"),
        plan=plan(),
    )
    with served(plane, tmp_path) as address:
        page = browser()
        page.open(f"{address}/?token=t0ken")
        page.wait_for("document.querySelectorAll('#hardware .machine').length === 2")
        facts: dict[str, Any] = page.evaluate(
            "Object.fromEntries(Array.from(document.querySelectorAll("
            "'#hardware .machine[data-machine=\"box-q\"] dt')).map(dt => [dt.textContent,"
            " dt.nextElementSibling.textContent]))"
        )
        assert facts["simulated"] == "unknown" and facts["last report"] == "unknown"
        assert (
            page.evaluate(
                "document.querySelector('#hardware .machine[data-machine=\"box-q\"] .note')"
                ".textContent"
            )
            == "no GPUs reported"
        )
        alert = page.evaluate("document.querySelector('#alerts li').textContent")
        assert alert == "box-q: box-q is unreachable"
        notes = page.evaluate(
            "[document.querySelector('#copies .note').textContent,"
            " document.querySelector('#recovery .note').textContent]"
        )
        assert notes == [
            "copies are kept between the machines of a fleet",
            "the cluster did not answer",
        ]
        assert page.evaluate("document.querySelector('#live').dataset.state") == "live"
        render_all(page)
        page.screenshot(shots(tmp_path) / "dashboard-missing-figures.png")
        assert page.errors() == []
        assert off_loopback(page.requested_urls()) == []


REFUSED = "refused (capacity): capacity.no-free-card: every card large enough is held: " + (
    ", ".join(f"GPU-{i} on m{i // 4} by svc-{i}" for i in range(40))
)


def test_a_long_sentence_sent_once_for_many_rows_is_shown_in_every_row(
    tmp_path: Path, browser: Callable[[], Page]
) -> None:
    refused = tuple(
        workload(f"r{i}", "refused", sentence=REFUSED, machine=None, gpu=None, endpoint=None)
        for i in range(3)
    )
    views = (workload("chat"), *refused)
    plane = FakePlane(
        machines=fleet(machine("box-a")), workloads=views, batches=(),
        copies=CopyListing(plane="p", copies=()),
        recovery=RecoveryListing(plane="p", control_plane="none", services=()), plan=plan(),
    )  # fmt: skip
    with served(plane, tmp_path) as address:
        page = browser()
        page.open(f"{address}/?token=t0ken")
        page.wait_for("document.querySelectorAll('#workloads > .table tbody tr').length === 4")
        shown = page.evaluate(
            "Object.fromEntries(Array.from(document.querySelectorAll("
            "'#workloads > .table tbody tr')).map(tr => [tr.dataset.name,"
            " tr.lastElementChild.textContent]))"
        )
        assert shown == {w.name: w.sentence for w in views}  # as ps says each, in full
        targets = page.evaluate("Array.from(document.querySelectorAll('#pg-target option'))"
                                ".map(o => o.value)")  # fmt: skip
        assert targets == ["", "chat"]  # the serving service, not the refused ones
        assert page.errors() == []
