"""Settings every app is configured with: one frozen value, read from the environment once.

Nothing here runs at import time; commands call these functions lazily, so
``nodeau --help`` imports none of the adapters.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from attrs import field, frozen

from nodeau.domain.allowances import Allowances
from nodeau.domain.units import GIB
from nodeau.ports.errors import SettingsError

DEFAULT_PUBLISHER = "https://huggingface.co"
DEFAULT_RESERVE = 2 * GIB


@frozen(kw_only=True)
class Settings:
    """Everything an app is configured with, read once by its composition root.

    ``environ`` is the environment as it was read: what a model server or a user
    service is started with, and where the plane and the kubeconfig are chosen.
    Nothing else reads the environment.
    """

    home: Path
    machine: str
    catalog: Path
    publisher_url: str
    reserve_bytes: int
    allowances: Allowances
    simulated_gpus: str | None = None  # e.g. "1 x 24 GiB": simulated cards, the model on the CPU
    environ: Mapping[str, str] = field(factory=dict, eq=False, repr=False)

    @property
    def models_root(self) -> Path:
        return self.home / "models"

    @property
    def own_catalog(self) -> Path:
        """Where a person's own catalog entries go (``nodeau models catalog add``): the file
        ``NODEAU_CATALOG`` names, else ``catalog.json`` in the home, read over the shipped
        catalog."""
        return self.catalog if self.catalog != shipped_catalog() else self.home / "catalog.json"

    @property
    def registry_path(self) -> Path:
        return self.home / "registry.sqlite3"

    @property
    def state_path(self) -> Path:
        return self.home / "state.sqlite3"

    @property
    def run_dir(self) -> Path:
        """Where the home's user services keep their records (ports, origins, the gateway)."""
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"


def data_home(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    """Where Nodeau keeps its data: $NODEAU_HOME, else the user's data folder.

    XDG on Linux (a relative $XDG_DATA_HOME is invalid by the spec and ignored),
    Application Support on macOS.
    """
    if env.get("NODEAU_HOME"):
        return Path(env["NODEAU_HOME"]).expanduser()
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    if platform == "darwin":
        return home / "Library" / "Application Support" / "nodeau"
    xdg = env.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".local" / "share"
    return base / "nodeau"


def shipped_catalog() -> Path:
    """The catalog document installed with Nodeau, beside this module (package data; a
    file on disk, since model servers and the controller are given its path)."""
    return Path(__file__).with_name("catalog.json")


def settings_from(env: Mapping[str, str]) -> Settings:
    """Settings from environment variables, each with a documented default."""
    reserve = env.get("NODEAU_DISK_RESERVE_BYTES", "").strip()
    if reserve and not reserve.isdigit():
        raise SettingsError(
            f"NODEAU_DISK_RESERVE_BYTES must be a whole number of bytes, got {reserve!r}"
        )
    return Settings(
        home=data_home(env),
        machine=env.get("NODEAU_MACHINE") or os.uname().nodename or "localhost",
        catalog=Path(env["NODEAU_CATALOG"]) if env.get("NODEAU_CATALOG") else shipped_catalog(),
        publisher_url=env.get("NODEAU_PUBLISHER_URL") or DEFAULT_PUBLISHER,
        reserve_bytes=int(reserve) if reserve else DEFAULT_RESERVE,
        allowances=Allowances(),
        simulated_gpus=env.get("NODEAU_SIMULATED_GPUS") or None,
        environ=MappingProxyType(dict(env)),
    )


def utc_now() -> datetime:
    return datetime.now(UTC)
