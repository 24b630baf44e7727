"""On a fleet too, ``nodeau ps`` says a service whose endpoint was stopped: no address and
the same sentence as on one machine (the Kubernetes plane over the controller's fakes)."""

from __future__ import annotations

from nodeau.domain.workloads import WorkloadKind
from tests.support.fakes.controller_fleet import ENDPOINT, fleet_plane, serving_chat


def test_a_fleet_service_with_its_endpoint_stopped_shows_no_address_and_says_so() -> None:
    cluster, _clock, ctl = serving_chat()
    plane = fleet_plane(cluster)
    [up] = plane.serving.workloads()
    assert (up.state, up.endpoint) == ("serving", ENDPOINT)
    assert up.sentence.endswith("; nothing to do")

    assert plane.serving.stop("chat", workload=False).startswith("chat: endpoint stopped")
    ctl.resync()
    [off] = plane.serving.workloads()
    assert (off.state, off.endpoint) == ("serving", None)
    assert off.sentence.endswith("; loaded, endpoint stopped; nodeau run chat brings it back")

    cluster.objects.want_endpoint(WorkloadKind.SERVICE, "chat", serving=True)  # as run asks
    ctl.resync()
    [back] = plane.serving.workloads()
    assert (back.endpoint, back.sentence) == (ENDPOINT, up.sentence)
