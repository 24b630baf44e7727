"""On the fleet, a model no one card holds is split across the fewest free cards of one
machine: one Reservation per card, the status naming each, the Pod given every card, and
every card freed together when the service goes. A real API server and KWOK nodes; the
controller runs in this process one pass at a time (as tests/kube/test_controller.py).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.ledger import read_state
from nodeau.adapters.kube.pods import read_pod
from nodeau.adapters.record_json import to_plain, unpack
from nodeau.domain.reservations import Reservation
from nodeau.ports.state import Admission
from tests.support.real.kube_controller import (
    add_machine,
    controller,
    create,
    get,
    gpu_uuid,
    huge,
    ledger,
    serving,
    settle,
    small,
    split_giant,
    status,
)


def test_a_model_larger_than_any_card_takes_two_cards_of_one_machine(fresh_fleet: Any) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 3, split_giant("m1"), small("m1"))
    add_machine(api, "m2", 1, split_giant("m2"))  # one card: no split there
    create(api, "big", "giant")
    ctl = controller(api)
    settle(ctl, lambda: serving(api, "big"), "big serving")

    st = status(api, "big")
    cards = [gpu_uuid("m1", 0), gpu_uuid("m1", 1)]
    placement = unpack(st["admission"], Admission, "the admission").placement
    assert [x.gpu_uuid for x in placement.reservations] == cards
    assert (st["machine"], st["gpuUUID"]) == ("m1", cards[0])
    assert st["reservation"] == to_plain(placement.reservation, Reservation)
    assert st["moreReservations"] == [to_plain(x, Reservation) for x in placement.more]
    assert st["reservedBytes"] == sum(x.bytes for x in placement.reservations)
    assert sorted((x.workload, x.gpu_uuid) for x in ledger(api)) == [("big", c) for c in cards]
    assert st["record"]["workload"]["more_cards"] == cards[1:]
    pod = client.CoreV1Api(api).read_namespaced_pod("service-big", r.NAMESPACE)
    (container,) = pod.spec.containers
    env = {e.name: e.value for e in container.env}
    assert env["NVIDIA_VISIBLE_DEVICES"] == ",".join(cards)
    assert pod.spec.node_name == "m1"

    create(api, "chat", "qwen")  # the third card, alone
    settle(ctl, lambda: serving(api, "chat"), "chat serving")
    assert status(api, "chat")["gpuUUID"] == gpu_uuid("m1", 2)

    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "big"
    )
    settle(ctl, lambda: get(api, "big") is None, "big gone")
    assert read_pod(api, "service", "big") is None
    assert [(x.workload, x.gpu_uuid) for x in ledger(api)] == [("chat", gpu_uuid("m1", 2))]
    released = client.CoreV1Api(api).list_namespaced_event(
        r.NAMESPACE, field_selector="involvedObject.name=big,reason=Released"
    )
    [event] = released.items
    assert f"; {cards[0]}, {cards[1]} on m1 are free again (" in event.message


def test_a_model_whose_layers_are_not_known_is_refused_as_before(fresh_fleet: Any) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 3, huge("m1"))  # a summary without its layers
    create(api, "big", "giant")
    ctl = controller(api)
    settle(ctl, lambda: status(api, "big").get("state") == "refused", "big refused")
    assert status(api, "big")["refusal"]["code"] == "capacity.no-card-large-enough"
    assert ledger(api) == ()


def test_a_status_whose_crd_pruned_the_further_cards_still_backs_their_claims(
    fresh_fleet: Any,
) -> None:
    """A cluster whose GPUService CRD is from before splits keeps no ``moreReservations``:
    the recorded decision still says which further cards the split holds, so their claims
    are never taken for leftovers and freed under it."""
    api = fresh_fleet
    add_machine(api, "m1", 3, split_giant("m1"))
    create(api, "big", "giant")
    ctl = controller(api)
    settle(ctl, lambda: serving(api, "big"), "big serving")
    custom = client.CustomObjectsApi(api)
    found = custom.get_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "big"
    )
    found["status"].pop("moreReservations")
    custom.replace_namespaced_custom_object_status(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "big", found
    )
    assert "moreReservations" not in status(api, "big")
    reading = read_state(api)
    assert reading.leftovers == ()
    ctl.resync()
    assert sorted(x.gpu_uuid for x in ledger(api)) == [gpu_uuid("m1", 0), gpu_uuid("m1", 1)]
