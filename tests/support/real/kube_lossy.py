"""Machines that can go off the network: each KWOK node here has a KWOK process of its own.

A node annotated ``kwok.x-k8s.io/node=lossy-<name>`` has its own KWOK: SIGSTOP is its kubelet
going quiet (its Lease stops renewing), SIGCONT brings it back. The agent is the test's
``publish_report``: a machine off the network is one whose report is no longer renewed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from tests.support.real.kube_cluster import KWOK_ANNOTATION, Cluster, binary_dir
from tests.support.real.kube_nodes import kwok_node


# The control plane's shared KWOK cannot be told to leave a node alone (taking the annotation
# off does not stop its Lease renewals: measured 2026-11-30), hence a KWOK per lossy node.
# While it is stopped a Pod deleted gracefully stays until SIGCONT (its KWOK then finishes the
# deletion); a Pod deleted with grace 0 goes at once.
class LossyMachine:
    """One KWOK node whose kubelet (its own KWOK process) a test can stop and start."""

    def __init__(self, cluster: Cluster, api: Any, name: str, index: int) -> None:
        self.name = name
        bins = binary_dir()
        log = (cluster.workdir / f"kwok-{name}.log").open("ab")
        self.process = subprocess.Popen(
            [
                str(bins / "kwok"),
                f"--kubeconfig={cluster.kubeconfig}",
                f"--config={bins / 'kwok-stages.yaml'}",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=lossy-{name}",
                "--node-lease-duration-seconds=40",
                f"--cidr=10.{100 + index}.0.0/16",  # its own Pod addresses
                "--node-ip=127.0.0.1",
                "--server-address=127.0.0.1:0",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        body = kwok_node(name)
        body["metadata"]["annotations"][KWOK_ANNOTATION] = f"lossy-{name}"
        client.CoreV1Api(api).create_node(body)
        self.off_since: datetime | None = None

    def off(self) -> None:
        """Its kubelet stops answering (its node Lease is no longer renewed)."""
        os.killpg(self.process.pid, signal.SIGSTOP)
        self.off_since = datetime.now(UTC)

    def on(self) -> None:
        """It answers again."""
        os.killpg(self.process.pid, signal.SIGCONT)
        self.off_since = None

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGCONT)
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@contextmanager
def lossy_machines(cluster: Cluster, api: Any, *names: str) -> Iterator[dict[str, LossyMachine]]:
    """These machines, each with its own KWOK, stopped at the end whatever happened."""
    with ExitStack() as stack:
        machines: dict[str, LossyMachine] = {}
        for i, name in enumerate(names):
            machine = LossyMachine(cluster, api, name, i)
            stack.callback(machine.stop)
            machines[name] = machine
        yield machines
