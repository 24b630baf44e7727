"""The controller's composition root: the Kubernetes adapters behind its ports.

The one place under apps/controller that names an adapter; everything else
takes the ports it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.entitlement_document import compiled_in_verifier
from nodeau.adapters.kube.batch_results import KubeFleetBatches
from nodeau.adapters.kube.copies import KubeModelCopies
from nodeau.adapters.kube.entitlement import KubeEntitlementStore
from nodeau.adapters.kube.events import KubeEventLog, Sending
from nodeau.adapters.kube.health_store import KubeHealthRecords
from nodeau.adapters.kube.informer_cache import KnownObjects
from nodeau.adapters.kube.lease import fenced_client
from nodeau.adapters.kube.marks import KubeFleetMarks
from nodeau.adapters.kube.organisation import KubeOrganisationPolicy
from nodeau.adapters.kube.pods import KubeServerPods, PodImages
from nodeau.adapters.kube.qualifications import KubeQualificationRecords
from nodeau.adapters.kube.reports import KubeMachineReports
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.watch import KubeWorkloadWatch
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.apps.controller.loop import Controller, ControllerPorts
from nodeau.apps.settings import shipped_catalog
from nodeau.ports.entitlements import EntitlementVerifier

# objects of a batch reconciled at once: enough to keep the API server busy while each waits
# for its answers (bench/reconcile.py measures it); each still decides in the batch's order
DEFAULT_WORKERS = 8


def kube_ports(
    api: Any,
    *,
    clock: Callable[[], datetime],
    identity: str,
    verifier: EntitlementVerifier | None = None,
    images: PodImages | None = None,
    refusal_list_age: timedelta = timedelta(0),
    sending: Sending | None = None,
) -> ControllerPorts:
    """The controller's ports on one configured API client (``identity`` signs decisions;
    ``verifier``: None, the keys compiled into the package, the only ones a deployed
    controller trusts; tests pass their own here, and nowhere else can; ``images``: what
    the workloads' Pods run, default what scripts/build-images builds; ``refusal_list_age``:
    how old a list of the claims a refusal may be decided on, zero for one made during the
    admission itself; ``sending``: the Events written beside the work, None: each at once)."""
    known = KnownObjects()  # one cache of its objects for every port that reads them
    return ControllerPorts(
        store=KubeStateStore(
            api,
            clock=clock,
            identity=identity,
            known=known,
            refusal_list_age=refusal_list_age,
            sending=sending,
        ),
        objects=KubeWorkloadObjects(api, identity=identity, known=known),
        pods=KubeServerPods(api, images, known),
        reports=KubeMachineReports(api),
        marks=KubeFleetMarks(api),
        health=KubeHealthRecords(api),
        events=KubeEventLog(api, identity=identity, sending=sending),
        watch=KubeWorkloadWatch(api, known),
        copies=KubeModelCopies(api),
        entitlement=KubeEntitlementStore(api),
        verifier=verifier or compiled_in_verifier(),
        organisation=KubeOrganisationPolicy(api),
        batches=KubeFleetBatches(api),
        measured=KubeQualificationRecords(api),
        evidence=KubeQualificationRecords(api),
        catalog=JsonCatalogFile(shipped_catalog()),
    )


def kube_controller(
    api: Any,
    *,
    clock: Callable[[], datetime],
    identity: str,
    log: Callable[[str], None],
    verifier: EntitlementVerifier | None = None,
    fence: Callable[[], float] | None = None,
    images: PodImages | None = None,
    workers: int = DEFAULT_WORKERS,
    sole_writer_for: timedelta = timedelta(0),
) -> Controller:
    """A controller acting on the cluster ``api`` talks to. ``fence``: called before every
    write any of its ports sends, and raising to stop it (the leader election's
    ``Leadership.fence``); None: it writes unfenced (one controller, or a test's).
    ``workers``: objects of a batch reconciled at once (their requests overlap).
    ``sole_writer_for``: how long a list of the claims stays this controller's own to
    decide on, because no other controller claims or frees a card meanwhile (the leader's
    renew deadline: a deposed leader writes nothing after it); zero: a refusal is decided
    on claims listed during its own admission, as several unelected controllers need."""
    if fence is not None:
        api = fenced_client(api, fence, identity, log)
    ports = kube_ports(
        api,
        clock=clock,
        identity=identity,
        verifier=verifier,
        images=images,
        refusal_list_age=sole_writer_for,
        sending=Sending(api, lanes=max(1, workers // 2), log=log),
    )
    return Controller(ports, clock=clock, log=log, workers=workers)
