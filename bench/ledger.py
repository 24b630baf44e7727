"""Benchmark: what one card's Reservation weighs, and what listing the ledger costs.

Usage: python bench/ledger.py [--cards 8000]
Prints one object's bytes, the whole list's bytes, and the list's time against one GET in the
same run (docs/adr/0017-a-ledger-that-scales.md; method: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from nodeau.adapters.kube import resources as r  # noqa: E402
from nodeau.adapters.kube.claims import PLURAL, claim, name_of, read_claim  # noqa: E402
from nodeau.adapters.kube.ledger import read_ledger  # noqa: E402
from nodeau.domain.recording import Claim  # noqa: E402
from nodeau.domain.reservations import Reservation  # noqa: E402
from tests.support.real.kube_apply import apply_manifests  # noqa: E402
from tests.support.real.kube_cluster import ControlPlane  # noqa: E402

DEPLOY = ROOT / "deploy"
CARDS_PER_MACHINE = 8


def card(i: int) -> Reservation:
    """Card ``i`` of the fleet, with an NVIDIA-shaped UUID, held by a workload of its own."""
    return Reservation(
        workload=f"svc-{i:05d}",
        machine=f"kwok-node-{i // CARDS_PER_MACHINE:04d}",
        gpu_uuid=f"GPU-{i:08x}-0000-4000-8000-{i:012x}",
        bytes=4 << 30,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=8000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        plane = ControlPlane(Path(work))
        try:
            cluster = plane.start()
            api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
            apply_manifests(api, [DEPLOY / "00-namespace.yaml", DEPLOY / "10-crds.yaml"])
            by = Claim(by="nodeau-controller-7d9f8b6c5-x2x4q", at=datetime.now(UTC))
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: claim(api, card(i), by), range(args.cards)))
            print(f"claimed {args.cards} cards in {time.perf_counter() - started:.1f} s")

            custom: Any = client.CustomObjectsApi(api)
            one = custom.get_namespaced_custom_object(
                r.GROUP, r.VERSION, r.NAMESPACE, PLURAL, name_of(card(0).gpu_uuid)
            )
            print(f"one Reservation: {len(json.dumps(one, separators=(',', ':')))} bytes as read")
            page = custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, PLURAL)
            print(f"the whole list: {len(json.dumps(page, separators=(',', ':')))} bytes")

            gets, lists = [], []
            for _ in range(5):
                started = time.perf_counter()
                read_claim(api, card(0).gpu_uuid)
                gets.append(time.perf_counter() - started)
                started = time.perf_counter()
                held = read_ledger(api).held
                lists.append(time.perf_counter() - started)
                assert len(held) == args.cards
            get_s, list_s = statistics.median(gets), statistics.median(lists)
            print(
                f"read_ledger (pages of 500): p50 {list_s * 1e3:.0f} ms; one GET p50 "
                f"{get_s * 1e3:.1f} ms; {list_s / get_s:.0f}x one GET, "
                f"{list_s / args.cards * 1e6:.0f} us per card"
            )
            return 0
        finally:
            plane.stop()


if __name__ == "__main__":
    sys.exit(main())
