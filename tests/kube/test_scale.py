"""Scale: 100 KWOK machines with simulated cards, 500 GPUServices, one controller.

Every admitted service is placed with its Pod on its card, no card is held twice
(ledger or Pods), and only once every card is taken are the rest refused, with
capacity's code. bench/reconcile.py times the same fleet.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.real.kube_controller import controller as fleet_controller
from tests.support.real.kube_scale import check, populate

MACHINES, CARDS, SERVICES = 100, 4, 500


@pytest.mark.slow
def test_one_pass_decides_five_hundred_services_on_a_hundred_machines_and_again_nothing(
    fresh_fleet: client.ApiClient,
) -> None:
    populate(fresh_fleet, machines=MACHINES, cards=CARDS, services=SERVICES)
    controller = fleet_controller(fresh_fleet, identity="scale")  # an Enterprise fleet
    controller.resync()  # one pass decides every service
    decided = check(fresh_fleet, cards_total=MACHINES * CARDS)
    assert decided.problems == ()
    assert decided.undecided == 0
    assert decided.admitted == MACHINES * CARDS
    assert decided.refused == {"capacity.no-free-card": SERVICES - MACHINES * CARDS}
    assert decided.pods == MACHINES * CARDS
    controller.resync()  # a second pass changes no decision
    again = check(fresh_fleet, cards_total=MACHINES * CARDS)
    assert (again.admitted, again.refused, again.problems) == (
        decided.admitted,
        decided.refused,
        (),
    )
