"""The CLI on a fleet on a real API server: what it prints and what a test plants for it.

``banner`` is the line the Kubernetes plane prints first; ``one_line_error`` is the one
line of a failed command after it; ``write_ledger`` holds cards as the controller's
claims keep them.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from typing import Any

import yaml
from kubernetes import client

from nodeau.domain.reservations import Reservation
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_store import plant


def banner(cluster: Cluster) -> str:
    context = yaml.safe_load(cluster.kubeconfig.read_text())["current-context"]
    where = f"at {cluster.server} (context {context}), namespace nodeau-system"
    return f"nodeau: fleet on Kubernetes {where}"


def write_ledger(api: client.ApiClient, reservations: list[dict[str, Any]]) -> None:
    """Cards held, as the controller's claims keep them (one Reservation per card)."""
    for held in reservations:
        plant(api, Reservation(**held), by="test-controller", at=datetime.now(UTC))


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a failed command (after the plane's banner line, when it printed one)."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr
    lines = [
        line
        for line in done.stderr.strip().splitlines()
        if not line.startswith("nodeau: fleet on Kubernetes at ")
    ]
    assert len(lines) == 1, done.stderr
    return lines[0]
