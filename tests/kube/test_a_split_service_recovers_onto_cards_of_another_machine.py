"""A service split across two cards recovers, when its machine goes off the network, onto
free cards of another machine that hold it the same way, in one move: its new cards claimed
whole, its old ones freed. A real API server; the lost machine's KWOK is stopped
(tests/support/real/kube_lossy.py), the controller runs in this process on the real clock.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import (
    create,
    gpu_uuid,
    ledger,
    serving,
    split_giant,
    status,
)
from tests.support.real.kube_lossy import lossy_machines
from tests.support.real.kube_nodes import kwok_node
from tests.support.real.kube_recovery import Fleet, record

RECOVER = {"recovery": "automatic", "recoveryAfterSeconds": 5}


def held(api: Any) -> list[tuple[str, str]]:
    return sorted((x.machine, x.gpu_uuid) for x in ledger(api) if x.workload == "big")


def test_a_split_service_moves_to_two_free_cards_of_another_machine(
    fresh_fleet: Any, cluster: Cluster
) -> None:
    api = fresh_fleet
    fleet = Fleet(api)
    with lossy_machines(cluster, api, "a1") as lossy:
        fleet.machine("a1", 2, split_giant("a1"))
        client.CoreV1Api(api).create_node(kwok_node("b2"))
        fleet.machine("b2", 3, split_giant("b2"))
        create(api, "big", "giant", **RECOVER)
        fleet.until(lambda: serving(api, "big"), "big serving")
        assert held(api) == [("a1", gpu_uuid("a1", 0)), ("a1", gpu_uuid("a1", 1))]

        lossy["a1"].off()
        fleet.quiet.add("a1")
        fleet.until(lambda: {m for m, _ in held(api)} == {"b2"}, "big moved to b2", 150)
        cards = (gpu_uuid("b2", 0), gpu_uuid("b2", 1))
        assert held(api) == [("b2", c) for c in cards]
        w = record(api, "big").workload
        assert (w.machine, w.cards, w.recoveries) == ("b2", cards, 1)
        assert sum(w.tensor_split) == 3
        assert status(api, "big")["moreReservations"][0]["gpu_uuid"] == cards[1]
        fleet.until(lambda: serving(api, "big"), "big serving on b2", 60)
