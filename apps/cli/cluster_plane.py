"""Which plane a command acts on (this machine, or a fleet on Kubernetes) and where a CLI
records the choice.

Why it is so: docs/adr/decisions/apps-cli.md (cluster_plane.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

from nodeau.apps.settings import settings_from
from nodeau.ports.errors import SettingsError

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


def plane_choice() -> PlaneChoice:
    """Which plane this command acts on: NODEAU_PLANE, else plane.json, else this machine."""
    s = settings_from(os.environ)
    return choose(s.environ, s.home)


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


def kubeconfig_of(choice: PlaneChoice, environ: Mapping[str, str]) -> Path | None:
    """The kubeconfig file a command on this plane reads, made absolute, for a process that
    runs later without this shell (a workload's loopback endpoint): the plane's own, else
    the first of KUBECONFIG, else ~/.kube/config; None in a cluster (its service account)."""
    if choice.kubeconfig is not None:
        return choice.kubeconfig.expanduser().resolve()
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return Path(listed[0]).expanduser().resolve()
    home = Path("~/.kube/config").expanduser()
    return home.resolve() if home.is_file() else None
