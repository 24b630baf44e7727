"""``nodeau fleet invite`` and ``nodeau join``: bringing a machine into a fleet on Kubernetes.

Why it is so: docs/adr/decisions/apps-cli.md (cluster_join.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Protocol
from urllib.parse import urlsplit

from attrs import frozen
from cyclopts import Parameter
from returns.result import Failure, Success

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.cluster_plane import KUBERNETES, PlaneChoice, write_plane_file
from nodeau.apps.cli.durations import duration_option
from nodeau.apps.cli.errors import SettingsError
from nodeau.apps.machines.report import build_report
from nodeau.domain.platforms import join_refusal
from nodeau.ports.cluster import FleetMarks, MachineReports
from nodeau.ports.errors import NodeauError
from nodeau.ports.join_tokens import BootstrapToken, BootstrapTokens, parse_ca_hash, parse_token

DEFAULT_API_PORT = 6443


def parse_ttl(text: str) -> timedelta:
    """A token lifetime such as 30m, 24h or 7d."""

    return duration_option("--ttl", text)


def api_endpoint(server: str) -> str:
    """``host:port`` of an API server, given as a URL or ``host[:port]`` (default port 6443)."""
    parts = urlsplit(server if "://" in server else f"https://{server}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or parts.path not in ("", "/"):
        raise SettingsError(
            f"{server!r} is not an API server address: give https://HOST:PORT or HOST:PORT"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 443 if "://" in server and parts.scheme == "https" else DEFAULT_API_PORT
    return f"{host}:{port or default}"


def join_step(server: str, token: str, ca_hash: str) -> list[str]:
    """The node-join step, as kubeadm takes it."""
    return [
        "kubeadm", "join", api_endpoint(server),
        "--token", token, "--discovery-token-ca-cert-hash", ca_hash,
    ]  # fmt: skip


def default_kubeconfig() -> Path:
    """The kubeconfig kubectl would use: $KUBECONFIG, else ~/.kube/config."""

    kubeconfig = bootstrap.settings().environ.get("KUBECONFIG")
    return Path(kubeconfig) if kubeconfig else Path("~/.kube/config").expanduser()


def invite(*, ttl: str = "24h") -> int:
    """Create a bootstrap token and print the command that joins a new machine.

    Parameters
    ----------
    ttl
        How long the token is valid, e.g. 30m, 24h or 7d.
    """
    lifetime = parse_ttl(ttl)
    cluster = bootstrap.open_cluster()
    pin = cluster.tokens.ca_pin()
    token, expires = cluster.tokens.create(
        now=datetime.now(UTC), ttl=lifetime, description="created by nodeau fleet invite"
    )
    print(
        f"nodeau: bootstrap token {token.id} created in kube-system; it expires at "
        f"{expires:%Y-%m-%d %H:%M:%S} UTC. On the new machine, run:",
        file=sys.stderr,
    )
    print(f"nodeau join {cluster.server} --token {token.text} --ca-cert-hash {pin}")
    return 0


class JoiningCluster(Protocol):
    """The fleet's ports ``join`` uses: the CA its kubeconfig trusts, its Nodes, its reports."""

    @property
    def tokens(self) -> BootstrapTokens: ...

    @property
    def marks(self) -> FleetMarks: ...

    @property
    def reports(self) -> MachineReports: ...


@frozen(kw_only=True)
class JoinAsk:
    """What ``nodeau join`` was given (the kubeconfig made absolute)."""

    server: str
    token: str
    ca_cert_hash: str
    kubeconfig: Path
    dry_run: bool


@frozen(kw_only=True)
class ThisMachine:
    """This machine as ``join`` meets it, built by the command (a test gives its own)."""

    platform: str  # sys.platform's value, read by the composition root
    home: Path  # NODEAU_HOME: where the plane file is written
    machine: str  # this machine's name, a Node's name once it has joined
    kubeadm: str | None  # kubeadm on PATH; None when it is not there
    run_step: Callable[[list[str]], int]  # runs the node-join step; its exit status
    open_fleet: Callable[[Path], JoiningCluster]  # the fleet through this kubeconfig
    publish_report: Callable[[MachineReports], str]  # the first report, once; the machine


class NotJoined(NodeauError):
    """This machine did not join the fleet: why, and what to do next; nothing was written."""


def join(
    server: str,
    /,
    *,
    token: str,
    ca_cert_hash: str,
    kubeconfig: Path | None = None,
    dry_run: Annotated[bool, Parameter(negative="")] = False,
) -> int:
    """Join this machine to a fleet on Kubernetes and make nodeau act on that fleet.

    Parameters
    ----------
    server
        The cluster's API server, as nodeau fleet invite printed it.
    token
        The bootstrap token, as ID.SECRET (6 and 16 characters, a-z and 0-9).
    ca_cert_hash
        The cluster CA's pin, as sha256:HEX (64 hex digits).
    kubeconfig
        The kubeconfig this machine's nodeau uses for the fleet (default: kubectl's).
    dry_run
        Check everything and print the node-join step; run and write nothing.
    """

    s = bootstrap.settings()
    ask = JoinAsk(
        server=server,
        token=token,
        ca_cert_hash=ca_cert_hash,
        kubeconfig=(kubeconfig or default_kubeconfig()).expanduser().absolute(),
        dry_run=dry_run,
    )
    here = ThisMachine(
        platform=bootstrap.this_platform(),
        home=s.home,
        machine=s.machine,
        kubeadm=shutil.which("kubeadm"),
        run_step=lambda step: subprocess.run(step, check=False).returncode,
        open_fleet=lambda config: bootstrap.open_cluster(
            PlaneChoice(plane=KUBERNETES, origin="nodeau join", kubeconfig=config)
        ),
        publish_report=report_once,
    )
    return join_fleet(ask, here)


def join_fleet(ask: JoinAsk, here: ThisMachine) -> int:
    """Join ``here`` to the fleet ``ask`` names and register it; NotJoined, with nothing
    written, when it cannot be (a Mac, the step not run or failed, the pin or the
    kubeconfig wrong)."""
    refusal = join_refusal(here.platform)
    if refusal is not None:
        raise NotJoined(refusal)
    match parse_token(ask.token):
        case Success(BootstrapToken() as checked):
            pass
        case Failure(str() as problem):
            raise SettingsError(problem)
    match parse_ca_hash(ask.ca_cert_hash):
        case Success(str() as pin):
            pass
        case Failure(str() as problem):
            raise SettingsError(problem)
    step = join_step(ask.server, checked.text, pin)
    cluster, nodes = reached(ask.kubeconfig, pin, here.open_fleet)
    shown = " ".join(step)
    if here.machine in nodes:
        print(f"node-join step: not needed, {here.machine} is already a Node of this cluster")
    elif ask.dry_run:
        print(f"node-join step (not run: --dry-run): {shown}")
    elif here.kubeadm is None:
        print(f"node-join step (not run: kubeadm is not on PATH): {shown}")
        raise NotJoined(
            "the node-join step did not run (kubeadm is not on PATH): run the step above as "
            "root on this machine, then this nodeau join again; nothing was written"
        )
    else:
        print(f"node-join step: {shown}", flush=True)
        status = here.run_step(step)
        if status != 0:
            raise NotJoined(
                f"kubeadm join failed (exit {status}): see what it said above, then run "
                "nodeau join again; nothing was written"
            )
    if ask.dry_run:
        print(
            f"dry run: {ask.kubeconfig} reaches the cluster and its CA matches the pin; "
            "nothing was run or written (without --dry-run, nodeau join joins this machine)"
        )
        return 0
    path = write_plane_file(here.home, kubeconfig=ask.kubeconfig, context=None)
    print(
        f"registered: nodeau on this machine now acts on the fleet on Kubernetes ({path}; "
        "NODEAU_PLANE=machine overrides it for one command)"
    )
    try:
        machine = here.publish_report(cluster.reports)
    except NodeauError as exc:
        print(f"agent report: not published ({exc.one_line()}); the agent reports when it starts")
        return 0
    print(f"agent report: published for {machine}; the agent keeps it fresh once it runs")
    return 0


def reached(
    config: Path, pin: str, open_fleet: Callable[[Path], JoiningCluster]
) -> tuple[JoiningCluster, tuple[str, ...]]:
    """The fleet ``config`` reaches and its Nodes, when it answers and trusts the CA ``pin``
    names; NotJoined saying what to do otherwise (nothing has run yet)."""
    try:
        cluster = open_fleet(config)
        nodes = cluster.marks.read().nodes
    except NodeauError as exc:
        raise NotJoined(
            f"no kubeconfig here reaches the fleet ({exc.one_line()}): put the fleet's "
            f"kubeconfig at {config} or give --kubeconfig, then run nodeau join again; "
            "nothing was run or written"
        ) from exc
    try:
        trusted = cluster.tokens.ca_pin()
    except NodeauError as exc:
        raise NotJoined(
            f"--ca-cert-hash cannot be checked against {config} ({exc.one_line()}); "
            "nothing was run or written"
        ) from exc
    if trusted != pin:
        raise NotJoined(
            f"--ca-cert-hash is not the CA of the cluster {config} reaches (its pin is "
            f"{trusted}): the kubeconfig is for another cluster or the pin was mistyped; "
            "use the command nodeau fleet invite printed; nothing was run or written"
        )
    return cluster, nodes


def report_once(reports: MachineReports) -> str:
    """Build this machine's report as the agent does and publish it once; the machine's name."""

    parts = bootstrap.machine_parts()
    models = parts.models
    s = models.settings
    built = build_report(
        inventory=parts.inventory,
        store=models.store,
        book=models.registry.book(),
        catalog=models.catalog(),
        inspector=models.inspector,
        now=datetime.now(UTC),
    )
    reports.publish(built.report)
    for problem in built.problems:
        print(f"agent report: {problem}")
    return s.machine
