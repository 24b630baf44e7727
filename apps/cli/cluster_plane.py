"""Which plane a command acts on, and saying so: this machine, or a fleet on Kubernetes.

Decisions recorded here:

* ``NODEAU_PLANE`` (``machine`` or ``kubernetes``) wins; otherwise
  ``$NODEAU_HOME/plane.json``, written by ``nodeau join``, chooses (with the
  kubeconfig and context to use); otherwise the plane is this machine. So a
  person can always force either plane for one command.
* The choice is read cheaply (one environment variable, one small file, no
  cyclopts, no Kubernetes client), so ``nodeau ps``'s fast path can ask it.
* On Kubernetes every fleet command first prints one line to stderr naming the
  API server, the kubeconfig context and the namespace, so which fleet a
  command acted on is never a guess.
* A cluster that cannot be reached, refuses the credentials or lacks Nodeau's
  CRDs is one line for a person, never a traceback (:func:`cluster_line`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import frozen

if TYPE_CHECKING:
    from nodeau.adapters.kube.client import Connection

MACHINE = "machine"
KUBERNETES = "kubernetes"
PLANES = (MACHINE, KUBERNETES)
PLANE_FILE = "plane.json"
NAMESPACE = "nodeau-system"  # resources.NAMESPACE, kept here so the choice imports nothing heavy


@frozen(kw_only=True)
class PlaneChoice:
    """The plane commands act on, where the choice came from, and the cluster's kubeconfig."""

    plane: str
    origin: str  # "NODEAU_PLANE", the plane file's path, or "default"
    kubeconfig: Path | None = None  # None: as kubectl finds it
    context: str | None = None

    @property
    def kubernetes(self) -> bool:
        return self.plane == KUBERNETES


def plane_file(home: Path) -> Path:
    """Where ``nodeau join`` records the plane this machine's CLI uses."""
    return home / PLANE_FILE


def _unusable(message: str) -> Exception:
    from nodeau.apps.cli.errors import SettingsError  # lazily: ps's fast path asks the plane

    return SettingsError(message)


def read_plane_file(path: Path) -> PlaneChoice | None:
    """The choice a plane file records; None when there is no file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise _unusable(f"{path} cannot be read ({exc}); remove it or run nodeau join") from exc
    plane = raw.get("plane") if isinstance(raw, dict) else None
    if plane not in PLANES:
        raise _unusable(f"{path}: plane must be one of {', '.join(PLANES)}, got {plane!r}")
    kubeconfig, context = raw.get("kubeconfig"), raw.get("context")
    return PlaneChoice(
        plane=plane,
        origin=str(path),
        kubeconfig=Path(kubeconfig) if isinstance(kubeconfig, str) and kubeconfig else None,
        context=context if isinstance(context, str) and context else None,
    )


def choose(env: Mapping[str, str], home: Path) -> PlaneChoice:
    """The plane: NODEAU_PLANE, else the plane file, else this machine."""
    forced = env.get("NODEAU_PLANE", "").strip()
    if forced and forced not in PLANES:
        raise _unusable(f"NODEAU_PLANE must be one of {', '.join(PLANES)}, got {forced!r}")
    recorded = None if forced == MACHINE else read_plane_file(plane_file(home))
    if forced == KUBERNETES:
        if recorded is not None and recorded.kubernetes:
            return PlaneChoice(
                plane=KUBERNETES,
                origin="NODEAU_PLANE",
                kubeconfig=recorded.kubeconfig,
                context=recorded.context,
            )
        return PlaneChoice(plane=KUBERNETES, origin="NODEAU_PLANE")
    if forced == MACHINE:
        return PlaneChoice(plane=MACHINE, origin="NODEAU_PLANE")
    return recorded if recorded is not None else PlaneChoice(plane=MACHINE, origin="default")


def chosen() -> PlaneChoice:
    """The plane this process's commands act on."""
    from nodeau.apps.cli.bootstrap import data_home

    return choose(os.environ, data_home(os.environ))


def on_kubernetes() -> bool:
    """Whether commands act on a fleet on Kubernetes (cheap: no client is imported)."""
    return chosen().kubernetes


def write_plane_file(home: Path, *, kubeconfig: Path | None, context: str | None) -> Path:
    """Record that this machine's CLI acts on the fleet on Kubernetes; the file's path."""
    path = plane_file(home)
    home.mkdir(parents=True, exist_ok=True)
    document = {
        "plane": KUBERNETES,
        "kubeconfig": str(kubeconfig) if kubeconfig is not None else None,
        "context": context,
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


def banner(server: str, context: str | None) -> str:
    """The line every fleet command prints first on Kubernetes."""
    where = f"context {context}" if context else "in-cluster service account"
    return f"nodeau: fleet on Kubernetes at {server} ({where}), namespace {NAMESPACE}"


def open_cluster(choice: PlaneChoice | None = None) -> Connection:
    """Connect as the plane choice says and print the banner line to stderr."""
    from nodeau.adapters.kube.client import connect

    c = choice if choice is not None else chosen()
    connection = connect(c.kubeconfig, c.context)
    print(banner(connection.server, connection.context), file=sys.stderr, flush=True)
    return connection


def cluster_line(exc: BaseException) -> str | None:
    """One line for a failure talking to the cluster; None when it is not one."""
    kinds = _cluster_failures()
    if not isinstance(exc, kinds):
        return None
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return _api_line(status, getattr(exc, "reason", ""), getattr(exc, "body", None))
    text = " ".join(str(exc).split())
    if type(exc).__module__.startswith("urllib3"):
        reason = getattr(exc, "reason", None) or text
        return f"the Kubernetes API server cannot be reached: {' '.join(str(reason).split())}"
    return text


def _cluster_failures() -> tuple[type[BaseException], ...]:
    kinds: list[type[BaseException]] = []
    for module, name in (
        ("nodeau.adapters.kube.client", "ClusterUnreachable"),
        ("nodeau.adapters.record_json", "RecordError"),
        ("kubernetes.client.exceptions", "ApiException"),
        ("kubernetes.config.config_exception", "ConfigException"),
        ("urllib3.exceptions", "HTTPError"),
    ):
        loaded = sys.modules.get(module)  # nothing that was never imported can have failed
        kind = getattr(loaded, name, None) if loaded is not None else None
        if isinstance(kind, type) and issubclass(kind, BaseException):
            kinds.append(kind)
    return tuple(kinds)


def _api_line(status: int, reason: str, body: Any) -> str:
    message = reason
    try:
        parsed = json.loads(body) if isinstance(body, str | bytes) else None
        if isinstance(parsed, dict) and parsed.get("message"):
            message = str(parsed["message"])
    except ValueError:
        pass
    hint = {
        401: " (the kubeconfig's credentials were not accepted)",
        403: " (the kubeconfig's user may not do this)",
        404: " (are Nodeau's CRDs installed? kubectl apply -f deploy/)",
    }.get(status, "")
    return f"the Kubernetes API answered {status}: {' '.join(message.split())}{hint}"
