"""A real browser for the tests: Debian's ``chromium``, headless, over the DevTools Protocol.

Found as ``$NODEAU_CHROMIUM``, else ``chromium`` on PATH; without one the test fails under
``CI=true`` (scripts/test installs it there) and is skipped elsewhere, saying how to install it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import websocket

INSTALL = "apt-get install -y chromium (Debian's chromium; scripts/test does it under CI=true)"
START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 60.0
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


def chromium_binary() -> Path:
    """Chromium; a failure under CI=true, a skip elsewhere, when there is none."""
    chosen = os.environ.get("NODEAU_CHROMIUM") or shutil.which("chromium")
    if chosen and Path(chosen).is_file():
        return Path(chosen)
    message = f"no chromium found ({INSTALL}); CI={os.environ.get('CI', '')!r}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


# CDP and not Selenium: the tests need the page's network log (to prove no request leaves
# 127.0.0.1), its script errors and screenshots, which CDP gives as events straight from the
# browser (``Network.requestWillBeSent``, ``Runtime.exceptionThrown``), with no driver binary to
# match the browser and no package beyond ``websocket-client`` (the Kubernetes client needs it
# already). Selenium would reach the same events through CDP anyway.
class Page:
    """One tab, over its DevTools WebSocket: commands, and the events kept as they come."""

    def __init__(self, ws_url: str) -> None:
        # Chromium refuses DevTools connections that send an Origin it was not told to allow
        self._ws = websocket.create_connection(ws_url, timeout=CALL_TIMEOUT_S, suppress_origin=True)
        self._next = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def close(self) -> None:
        self._ws.close()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def pump(self, seconds: float) -> None:
        """Take the events that arrive within ``seconds``."""
        self._ws.settimeout(seconds)
        try:
            while True:
                message = json.loads(self._ws.recv())
                if "method" in message:
                    self.events.append(message)
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self._ws.settimeout(CALL_TIMEOUT_S)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        found = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in found:
            raise AssertionError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60.0) -> Any:
        """The value of ``expression`` once it is truthy; fails after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            assert time.monotonic() < deadline, f"never true: {expression}"
            self.pump(0.2)

    def screenshot(self, path: Path) -> Path:
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def requested_urls(self) -> list[str]:
        """Every URL the page asked for so far (its network log)."""
        self.pump(0.1)
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
        ]

    def errors(self) -> list[str]:
        """Script exceptions and console errors so far."""
        self.pump(0.1)
        found = []
        for e in self.events:
            if e["method"] == "Runtime.exceptionThrown":
                found.append(json.dumps(e["params"]["exceptionDetails"])[:500])
            elif e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error":
                found.append(e["params"]["entry"]["text"])
            elif e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] == "error":
                found.append(json.dumps(e["params"]["args"])[:500])
        return found


def off_loopback(urls: list[str]) -> list[str]:
    """The URLs among ``urls`` that go anywhere but this machine's loopback (``data:`` and
    ``about:`` never leave the browser)."""
    return [
        u for u in urls if urlsplit(u).scheme not in ("data", "about", "blob")
        and (urlsplit(u).hostname or "") not in LOOPBACK
    ]  # fmt: skip


@contextmanager
def chromium(
    width: int = 1400, height: int = 1000, extra_args: Sequence[str] = ()
) -> Iterator[Callable[[], Page]]:
    """A headless Chromium of its own (a fresh profile), started with ``extra_args`` too
    (``--host-resolver-rules=...``); yields a maker of new tabs."""
    binary = chromium_binary()
    profile = Path(tempfile.mkdtemp(prefix="nodeau-chromium-"))
    args = [
        str(binary),
        "--headless=new",
        "--no-sandbox",  # the tests may run as root (CI containers), which the sandbox refuses
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        *extra_args,
        "about:blank",
    ]
    log = (profile / "chromium.log").open("wb")  # a file, never a pipe nobody reads
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    pages: list[Page] = []
    try:
        port = _devtools_port(profile, process)

        def new_page() -> Page:
            import urllib.request

            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT"
            )
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as answer:
                target = json.loads(answer.read())
            page = Page(target["webSocketDebuggerUrl"])
            pages.append(page)
            return page

        yield new_page
    finally:
        for page in pages:
            page.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(profile: Path, process: subprocess.Popen[bytes]) -> int:
    """The DevTools port Chromium chose, from the file it writes in its profile."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if marker.is_file():
            first = marker.read_text().splitlines()[:1]
            if first and first[0].isdigit():
                return int(first[0])
        if process.poll() is not None:
            said = (profile / "chromium.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"chromium exited with {process.returncode}: {said}")
        assert time.monotonic() < deadline, "chromium did not open its DevTools port"
        time.sleep(0.1)
