"""``nodeau dashboard [--open] [--json] [--stop]``: the local dashboard's address, with a
fresh token.

Why it is so: docs/adr/decisions/apps-cli.md (dashboard.py).
"""

from __future__ import annotations

import webbrowser
from typing import Annotated

from cyclopts import Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import to_json


def dashboard(
    *,
    open_browser: Annotated[bool, Parameter(name="--open", negative="")] = False,
    json: bool = False,
    stop: Annotated[bool, Parameter(negative="")] = False,
) -> int:
    """Start (or find) the local dashboard on 127.0.0.1 and print its address with a fresh
    token.

    Parameters
    ----------
    open_browser
        Also open the address in the default web browser.
    json
        Print the address, port, token and how it runs as JSON.
    stop
        Stop the dashboard instead.
    """

    if stop:
        was = bootstrap.close_dashboard()
        print("the dashboard was stopped" if was else "the dashboard was not running")
        return 0
    opened = bootstrap.open_dashboard()
    if json:
        print(to_json(opened))
    else:
        how = "started" if opened.started else "already running"
        print(f"dashboard {how} at {opened.address} ({opened.service})")
        print(f"open: {opened.url}")
        print(
            "opened once, it sets the page's cookie and drops the token from the address; "
            "the next `nodeau dashboard` makes a new token"
        )
    if open_browser:
        webbrowser.open(opened.url)
    return 0
