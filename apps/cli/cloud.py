"""``nodeau cloud``: connect to Nodeau Cloud (optional, off by default), see every call, leave.

Why it is so: docs/adr/decisions/apps-cli.md (cloud.py).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, TextIO

from attrs import frozen
from cyclopts import App
from returns.result import Failure, Success

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.bootstrap import utc_now
from nodeau.apps.cli.render import size, table, to_json
from nodeau.apps.cloud import bootstrap as cloud_root
from nodeau.apps.cloud import reporter, signin
from nodeau.apps.cloud.settings import base_url, cloud_settings
from nodeau.apps.cloud.status import cloud_status
from nodeau.apps.plans.commands import PlanInstall
from nodeau.domain.cloud import Association, parse_allowed
from nodeau.ports.cloud import CloudError, Installation, NodeauCloud
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from nodeau.apps.cli.bootstrap import Settings
    from nodeau.apps.cloud.settings import CloudSettings
    from nodeau.apps.cloud.signin import Connected
    from nodeau.apps.cloud.status import CloudStatus
    from nodeau.apps.planes.plane import Plane
    from nodeau.ports.cloud import DeviceCode

cloud_app = App(
    name="cloud",
    help="Nodeau Cloud, optional and off by default: connect, see every call, disconnect.",
)

REFUSED = 2  # signed in, but the cloud's entitlement was not installed
LAST_CALLS = 20  # calls a person sees without --all


@cloud_app.command(name="connect")
def connect(
    *, url: str | None = None, fleet: bool = False, allow: str = "", json: bool = False
) -> int:
    """Sign in to Nodeau Cloud: an account, a registered installation, an entitlement.

    Parameters
    ----------
    url
        The cloud's base URL (default: NODEAU_CLOUD_URL, else https://api.nodeau.ai).
    fleet
        Also send machine, GPU and workload metadata on a schedule and poll for the
        operations --allow names (never prompts, completions, embeddings or batch records).
    allow
        Operations the cloud may ask for, comma-separated: drain, undrain, stop-batch,
        stop-service. Anything else it asks for is refused and recorded.
    json
        Print the outcome as JSON.
    """
    choice = bootstrap.plane_choice()
    return connect_on(
        bootstrap.plane(),
        bootstrap.settings(),
        kubernetes=choice.kubernetes,
        url=url,
        fleet=fleet,
        allow=allow,
        json=json,
    )


def connect_on(
    on: Plane,
    s: Settings,
    *,
    kubernetes: bool,
    url: str | None,
    fleet: bool,
    allow: str,
    json: bool = False,
    sleep: Callable[[float], None] | None = None,
) -> int:
    """``nodeau cloud connect`` on ``on``; 0 connected, 2 connected with the entitlement
    refused, 1 not connected."""

    settings = cloud_settings(s.environ)
    target = settings.url if url is None else base_url(url, "--url")
    match parse_allowed(allow):
        case Success(allowed):
            pass
        case Failure(problem):
            raise SettingsError(problem)
    if allowed and not fleet:
        raise SettingsError("--allow needs --fleet: only a connected fleet polls for operations")
    state = cloud_root.cloud_state(s.home)
    cloud = cloud_root.nodeau_cloud(target, settings.timeout_s, state, utc_now)
    installation = Installation(
        installation_id=on.plans.in_force().installation_id,
        machine=s.machine,
        plane="kubernetes" if kubernetes else "machine",
        version=cloud_root.version(),
    )
    try:
        connected = signin.connect(
            on,
            cloud,
            state,
            installation,
            base_url=target,
            fleet=fleet,
            allowed=allowed,
            wait=settings.sign_in_wait,
            clock=utc_now,
            sleep=time.sleep if sleep is None else sleep,
            say=partial(_say_code, out=sys.stderr if json else sys.stdout),
        )
    except CloudError as exc:
        print(f"nodeau: not connected: {exc.one_line()}; nothing was changed", file=sys.stderr)
        return 1
    finally:
        cloud.close()
    pid = cloud_root.reporter().start(s.home, state.folder) if fleet else None
    if not fleet:
        cloud_root.reporter().stop(state.folder)
    if json:
        print(to_json(connected_view(connected, pid)))
    else:
        print("\n".join(connected_lines(connected, pid, settings)))
    refused = connected.entitlement is not None and not connected.entitlement.installed
    if refused and connected.entitlement is not None and not json:
        reason = connected.entitlement.plan.reason
        print(f"nodeau: entitlement.{reason}: {connected.entitlement.sentence}", file=sys.stderr)
    return REFUSED if refused else 0


@frozen(kw_only=True)
class ConnectedView:
    """``connect --json``: the association as a person may see it (never the credential)."""

    url: str
    account: str
    installation_id: str
    connected_at: datetime
    fleet: bool
    allowed: tuple[str, ...]
    reporter_pid: int | None
    entitlement: PlanInstall | None  # None: the cloud gave none


def connected_view(connected: Connected, pid: int | None) -> ConnectedView:
    a = connected.association
    return ConnectedView(
        url=a.base_url,
        account=a.account,
        installation_id=a.installation_id,
        connected_at=a.connected_at,
        fleet=a.fleet,
        allowed=tuple(sorted(k.value for k in a.allowed)),
        reporter_pid=pid,
        entitlement=connected.entitlement,
    )


def _say_code(code: DeviceCode, *, out: TextIO) -> None:
    page = code.verification_uri_complete or code.verification_uri
    print(f"To connect, open {page} and enter the code {code.user_code}", file=out, flush=True)
    print("Waiting for the sign-in to be approved...", file=out, flush=True)


def connected_lines(connected: Connected, pid: int | None, settings: CloudSettings) -> list[str]:
    a = connected.association
    lines = [
        f"Connected to Nodeau Cloud at {a.base_url} as {a.account};"
        f" installation {a.installation_id} is registered."
    ]
    e = connected.entitlement
    if e is None:
        lines.append("Nodeau Cloud gave no entitlement: the plan in force is unchanged.")
    elif e.installed:
        lines.append(e.sentence)
    else:
        lines.append(f"The entitlement from Nodeau Cloud was not installed ({e.plan.reason}).")
    if a.fleet:
        allowed = ", ".join(sorted(k.value for k in a.allowed)) or "none"
        lines += [
            f"Reporting machine, GPU and workload metadata every"
            f" {settings.report_interval.total_seconds():g} s and asking for operations every"
            f" {settings.poll_interval.total_seconds():g} s (reporter pid {pid});"
            f" operations allowed: {allowed}.",
            "Prompts, completions, embeddings, images and batch records never leave.",
        ]
    else:
        lines.append("Signed in only: nothing is reported (--fleet reports this fleet).")
    lines.append("Nothing listens: every call goes out from here (nodeau cloud status lists them).")
    return lines


@cloud_app.command(name="status")
def status(*, json: bool = False, all: bool = False) -> int:
    """Whether this installation is connected, and every outbound call with its size.

    Parameters
    ----------
    json
        Print it as JSON (every call).
    all
        List every call, not only the last 20.
    """
    print(status_text(bootstrap.settings(), json=json, every=all))
    return 0


def status_text(s: Settings, *, json: bool = False, every: bool = False) -> str:
    settings = cloud_settings(s.environ)
    state = cloud_root.cloud_state(s.home)
    view = cloud_status(
        state,
        cloud_root.reporter().running(state.folder),
        settings.report_interval,
        settings.poll_interval,
    )
    return to_json(view) if json else "\n".join(status_lines(view, every=every))


def _when(moment: object) -> str:

    return moment.isoformat(timespec="seconds") if isinstance(moment, datetime) else "never"


def status_lines(view: CloudStatus, *, every: bool = False) -> list[str]:
    if view.connected:
        lines = [
            f"Nodeau Cloud: connected to {view.url} as {view.account}"
            f" since {_when(view.connected_at)} (installation {view.installation_id})"
        ]
        if view.fleet:
            running = (
                f"reporter running (pid {view.reporter_pid})"
                if view.reporter_pid is not None
                else "reporter not running (nodeau cloud connect --fleet starts it)"
            )
            lines.append(
                f"fleet: reporting every {view.report_interval_s:g} s, operations every"
                f" {view.poll_interval_s:g} s; allowed: {', '.join(view.allowed) or 'none'};"
                f" {running}"
            )
        else:
            lines.append("signed in only: nothing is reported")
    else:
        lines = ["Nodeau Cloud: not connected (off: nothing reaches out)"]
    t = view.totals
    lines.append(
        f"calls: {t.calls} ({t.failed} failed), {size(t.bytes_sent)} sent,"
        f" {size(t.bytes_received)} received (request and answer bodies);"
        f" last succeeded {_when(t.last_ok)}, last failed {_when(t.last_failed)}"
    )
    shown = view.calls if every else view.calls[-LAST_CALLS:]
    if len(shown) < len(view.calls):
        lines.append(f"(the last {len(shown)} calls; --all lists every one)")
    if shown:
        rows = [
            [
                _when(c.at),
                c.purpose.value,
                c.method,
                c.url,
                str(c.bytes_sent),
                str(c.bytes_received),
                f"ok {c.status}" if c.ok else f"failed: {c.failure}",
            ]
            for c in shown
        ]
        lines.append(table(["at", "why", "method", "url", "sent", "received", "result"], rows))
    if view.operations:
        rows = [
            [_when(o.at), o.id, o.kind, o.target, o.outcome, o.sentence] for o in view.operations
        ]
        lines.append("operations the cloud asked for:")
        lines.append(table(["at", "id", "kind", "target", "outcome", "what"], rows))
    lines.append(f"kept in: {view.kept_in}")
    return lines


@cloud_app.command(name="disconnect")
def disconnect() -> int:
    """Forget the association and stop reaching out; the plan is left as it is."""
    print("\n".join(disconnect_lines(bootstrap.settings())))
    return 0


def disconnect_lines(s: Settings) -> list[str]:
    settings = cloud_settings(s.environ)
    state = cloud_root.cloud_state(s.home)
    stopped = cloud_root.reporter().stop(state.folder)
    association = state.association()
    if association is None:
        lines = ["Not connected to Nodeau Cloud: nothing to forget."]
        return [*lines, "Stopped the reporter that was still running."] if stopped else lines
    cloud = cloud_root.nodeau_cloud(association.base_url, settings.timeout_s, state, utc_now)
    try:
        _, failure = signin.disconnect(cloud, state)
    finally:
        cloud.close()
    lines = [
        f"Disconnected from Nodeau Cloud at {association.base_url}: the association and its"
        " credential are forgotten, and nothing reaches out any more."
    ]
    if failure is not None:
        lines.append(f"The cloud was not told ({failure}); it is forgotten here all the same.")
    lines.append(
        "The plan is unchanged: an installed entitlement keeps applying while it verifies"
        " offline (nodeau plan shows it; nodeau plan remove removes it)."
    )
    return lines


@cloud_app.command(name="run")
def run(*, once: bool = False) -> int:
    """The reporter in the foreground (what connect --fleet starts in the background).

    Parameters
    ----------
    once
        One report and one poll for operations, then the end.
    """
    return run_on(bootstrap.plane(), bootstrap.settings(), once=once)


def run_on(on: Plane, s: Settings, *, once: bool = False) -> int:

    settings = cloud_settings(s.environ)
    state = cloud_root.cloud_state(s.home)
    association = state.association()
    if association is None or not association.fleet:
        raise SettingsError("not connected as a fleet: run nodeau cloud connect --fleet first")
    stop = threading.Event()
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if main else None

    clients = cloud_root.CloudClients(settings.timeout_s, state, utc_now)

    def cloud_for(a: Association) -> NodeauCloud:
        return clients.at(a.base_url)

    def log(line: str) -> None:
        print(f"{_when(utc_now())} nodeau cloud: {line}", file=sys.stderr, flush=True)

    log(f"reporting to {association.base_url} for installation {association.installation_id}")
    try:
        reporter.run(on, cloud_for, state, settings, utc_now, stop, log, once=once)
    finally:
        clients.close()
        if main:
            signal.signal(signal.SIGTERM, before)
    return 0
