"""``nodeau fleet invite`` and ``nodeau join``: bringing a machine into a fleet on Kubernetes.

Decisions recorded here:

* ``invite`` creates a standard bootstrap token through the API and prints, on
  stdout and alone, the command to run on the new machine, with the cluster CA's
  pin as kubeadm computes it; what was created and when it expires go to stderr.
* ``join`` checks the token's and the pin's shape first (one line each), then
  performs the node-join step with ``kubeadm`` when it is on PATH, or prints
  the step exactly and says it did not run it (always so with ``--dry-run``).
  A kubeadm that fails stops the join: nothing is registered.
* Registering writes ``$NODEAU_HOME/plane.json`` (this machine's ``nodeau`` now
  acts on the fleet, with the kubeconfig given or the default one), then
  publishes this machine's first agent report once, unless ``--dry-run``. A
  cluster that cannot take the report yet is a warning: the agent reports when
  it starts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from cyclopts import Parameter
from returns.result import Failure, Success

from nodeau.apps.cli.cluster_plane import PlaneChoice, open_cluster, write_plane_file
from nodeau.apps.cli.errors import SettingsError
from nodeau.ports.cluster import BootstrapToken, MachineReports

DEFAULT_API_PORT = 6443


def parse_ttl(text: str) -> timedelta:
    """A token lifetime such as 30m, 24h or 7d."""
    from nodeau.apps.cli.durations import duration_option

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
    from nodeau.apps.cli.bootstrap import settings

    kubeconfig = settings().environ.get("KUBECONFIG")
    return Path(kubeconfig) if kubeconfig else Path("~/.kube/config").expanduser()


def invite(*, ttl: str = "24h") -> int:
    """Create a bootstrap token and print the command that joins a new machine.

    Parameters
    ----------
    ttl
        How long the token is valid, e.g. 30m, 24h or 7d.
    """
    lifetime = parse_ttl(ttl)
    cluster = open_cluster()
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
        Print the node-join step instead of running it, and publish no report.
    """
    from nodeau.adapters.kube.bootstrap_tokens import parse_ca_hash, parse_token
    from nodeau.apps.cli.bootstrap import settings

    match parse_token(token):
        case Success(BootstrapToken() as checked):
            pass
        case Failure(str() as problem):
            raise SettingsError(problem)
    match parse_ca_hash(ca_cert_hash):
        case Success(str() as pin):
            pass
        case Failure(str() as problem):
            raise SettingsError(problem)
    step = join_step(server, checked.text, pin)
    shown = " ".join(step)
    if dry_run:
        print(f"node-join step (not run: --dry-run): {shown}")
    elif shutil.which("kubeadm") is None:
        print(f"node-join step (not run: kubeadm is not on PATH; run it as root here): {shown}")
    else:
        print(f"node-join step: {shown}", flush=True)
        done = subprocess.run(step, check=False)
        if done.returncode != 0:
            print(
                f"nodeau: kubeadm join failed (exit {done.returncode}); "
                "this machine was not registered",
                file=sys.stderr,
            )
            return 1
    config = (kubeconfig or default_kubeconfig()).expanduser().absolute()
    path = write_plane_file(settings().home, kubeconfig=config, context=None)
    print(
        f"registered: nodeau on this machine now acts on the fleet on Kubernetes ({path}; "
        "NODEAU_PLANE=machine overrides it for one command)"
    )
    if not config.is_file():
        print(f"note: {config} does not exist yet; put the fleet's kubeconfig there")
    if dry_run:
        print("agent report: not published (--dry-run); the agent reports when it starts")
        return 0
    from nodeau.apps.cli.bootstrap import plane_choice

    return publish_first_report(plane_choice())


def publish_first_report(choice: PlaneChoice) -> int:
    """Publish this machine's agent report once; a warning when the cluster cannot take it."""
    from nodeau.ports.errors import NodeauError

    try:
        machine = report_once(open_cluster(choice).reports)
    except NodeauError as exc:
        print(f"agent report: not published ({exc.one_line()}); the agent reports when it starts")
        return 0
    print(f"agent report: published for {machine}; the agent keeps it fresh once it runs")
    return 0


def report_once(reports: MachineReports) -> str:
    """Build this machine's report as the agent does and publish it once; the machine's name."""
    from nodeau.apps import model_services as services
    from nodeau.apps.cli.bootstrap import settings
    from nodeau.apps.machine import inventory_for
    from nodeau.apps.machine_report import build_report

    models = services.build(settings())
    s = models.settings
    built = build_report(
        inventory=inventory_for(s.machine, s.simulated_gpus),
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
