"""The dashboard page in a real browser: the app served over a fake plane, and pictures.

``served`` runs the dashboard app on 127.0.0.1 over a ``FakePlane`` (token ``t0ken``);
``screenshot_of`` saves a picture of one section, under ``shots`` (``$NODEAU_SCREENSHOTS``
when set, else the test's folder).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import cast

import uvicorn

from nodeau.adapters.dashboard_token import TokenFile, write_owner_only
from nodeau.adapters.endpoint_client import HttpxEndpointClient
from nodeau.adapters.endpoint_metrics import metrics_texts
from nodeau.apps.dashboard.app import create_app
from nodeau.apps.dashboard.board import no_reading
from nodeau.apps.planes.plane import Plane
from nodeau.domain.hardware import MachineReading
from tests.support.builders.dashboard_views import NOW, FakePlane
from tests.support.real.browser import Page


def shots(tmp_path: Path) -> Path:
    chosen = os.environ.get("NODEAU_SCREENSHOTS", "").strip()
    return Path(chosen) if chosen else tmp_path / "screenshots"


def render_all(page: Page) -> None:
    """Have every section rendered, on screen or not: the page renders those off screen
    only once scrolled to (``content-visibility: auto``), and a picture beyond the screen
    would show them as blank boxes of a guessed height."""
    page.evaluate(
        "new Promise(done => { document.querySelectorAll('section, .machine').forEach("
        "e => { e.style.contentVisibility = 'visible'; });"  # CSSOM: the page's CSP allows it
        " requestAnimationFrame(() => requestAnimationFrame(() => done(true))); })"
    )


def screenshot_of(page: Page, section: str, path: Path) -> Path:
    """A picture of one section of the page."""
    render_all(page)
    box = page.evaluate(
        f"(() => {{ const r = document.getElementById({json.dumps(section)})"
        ".getBoundingClientRect(); return {x: r.left + window.scrollX, y: r.top + "
        "window.scrollY, width: r.width, height: r.height}; })()"
    )
    shot = page.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={**box, "scale": 1},
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(
    plane: FakePlane,
    tmp_path: Path,
    cards: Callable[[], MachineReading | None] = no_reading,
    now: datetime = NOW,
) -> Iterator[str]:
    """The dashboard app over ``plane`` on 127.0.0.1 (token ``t0ken``), this machine's cards
    read by ``cards``, its clock at ``now``; its address."""
    token = tmp_path / "token"
    write_owner_only(token, b"t0ken")
    app = create_app(
        cast(Plane, plane), client=HttpxEndpointClient(),
        model_rows=lambda: (), token=TokenFile(token), clock=lambda: now,
        cards=cards, metrics=metrics_texts,
    )  # fmt: skip
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, access_log=False, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the dashboard app did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
