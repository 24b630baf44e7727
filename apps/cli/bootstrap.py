"""The CLI's composition root: settings read once, the plane chosen once, adapters built lazily.

Nothing here runs at import time; a command asks for :func:`plane` (or for
``settings``) when it runs, and each adapter is built the first time the plane
uses it, so ``nodeau --help`` and ``nodeau ps`` on an empty home import little.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from functools import cached_property
from typing import TYPE_CHECKING

from nodeau.apps.cli import cluster_plane
from nodeau.apps.cli.cluster_plane import PlaneChoice, kubeconfig_of
from nodeau.apps.planes.machine_workloads import MachineWorkloads
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.settings import (
    DEFAULT_PUBLISHER,
    DEFAULT_RESERVE,
    Settings,
    data_home,
    settings_from,
    shipped_catalog,
    utc_now,
)

if TYPE_CHECKING:
    from nodeau.adapters.dashboard_service import Opened
    from nodeau.adapters.endpoint_services import Gateway
    from nodeau.adapters.llama_server import LocalServerProcesses, RuntimeChoice
    from nodeau.adapters.service_specs import FleetSource
    from nodeau.apps.models.services import ModelServices
    from nodeau.apps.planes.kubernetes import FleetCluster
    from nodeau.apps.planes.plane import Plane
    from nodeau.apps.qualification.machine import QualifyTools
    from nodeau.domain.catalog import Catalog
    from nodeau.domain.hardware import MachineReading
    from nodeau.domain.model_server import ServerAbilities
    from nodeau.domain.records import Starter
    from nodeau.ports.batches import MachineJobs
    from nodeau.ports.endpoints import LoopbackEndpoints
    from nodeau.ports.entitlements import EntitlementStore, EntitlementVerifier
    from nodeau.ports.hardware import GpuInventory
    from nodeau.ports.marks import SchedulingMarks
    from nodeau.ports.models import FetchProgress
    from nodeau.ports.organisation import Identity, OrganisationPolicy
    from nodeau.ports.runtime import FitEstimates, ModelRuntime, ServerLogs, ServerWatch
    from nodeau.ports.server_install import BuildProgress, ServerInstaller
    from nodeau.ports.state import StateStore

__all__ = [
    "DEFAULT_PUBLISHER",
    "DEFAULT_RESERVE",
    "Settings",
    "data_home",
    "plane",
    "settings",
    "settings_from",
    "shipped_catalog",
    "this_platform",
    "utc_now",
]


def settings() -> Settings:
    """The settings of this command, read from the environment."""
    return settings_from(os.environ)


def this_platform() -> str:
    """The operating system this command runs on (``sys.platform``), read here only: what
    depends on it (``join``, ``environment``) takes it as a value, so a test on Linux can
    give "darwin"."""
    return sys.platform


class LazyMachineParts:
    """``MachineParts``: each adapter of this machine built when first used."""

    def __init__(self, s: Settings, verifier: EntitlementVerifier | None = None) -> None:
        self._settings = s
        self._verifier = verifier  # None: the keys compiled into the package

    @cached_property
    def models(self) -> ModelServices:
        from nodeau.apps.models import bootstrap as model_services

        return model_services.build(self._settings)

    @cached_property
    def inventory(self) -> GpuInventory:
        from nodeau.adapters.this_machine import inventory_for

        return inventory_for(self._settings.machine, self._settings.simulated_gpus)

    @cached_property
    def state(self) -> StateStore:
        from nodeau.adapters.sqlite_state import SqliteStateStore

        return SqliteStateStore(self._settings.state_path, utc_now)

    @cached_property
    def qualifying(self) -> QualifyTools:
        from nodeau.adapters.probe_client import run_probes
        from nodeau.adapters.runtime_buffers import reported_total
        from nodeau.adapters.runtime_version import runtime_name
        from nodeau.apps.qualification.machine import QualifyTools

        return QualifyTools(
            probe=run_probes, reported_bytes=reported_total, runtime_name=runtime_name
        )

    @cached_property
    def starter(self) -> Starter:
        from nodeau.adapters.processes import this_starter

        return this_starter()

    @cached_property
    def jobs(self) -> MachineJobs:
        from nodeau.adapters.batch_files import HomeJobs

        return HomeJobs(self._settings.home)

    @cached_property
    def marks(self) -> SchedulingMarks:
        from nodeau.adapters.sqlite_marks import SqliteMarks

        return SqliteMarks(self._settings.state_path)

    @cached_property
    def cards(self) -> MachineReading:
        """The cards as read once for choosing the model server and asking it (NVML)."""
        return self.inventory.read()

    @cached_property
    def choice(self) -> RuntimeChoice:
        """The model server this machine runs: a CUDA build first where it has real cards."""
        from nodeau.adapters.this_machine import model_server

        return model_server(self._settings.environ, prefer_cuda=bool(self.cards.real_cards))

    @cached_property
    def server(self) -> ServerAbilities:
        from nodeau.adapters.this_machine import server_abilities

        return server_abilities(self.choice, self.cards, self._settings.environ)

    @cached_property
    def runtime(self) -> ModelRuntime:
        from nodeau.adapters.llama_cpp_python import LlamaCppPythonRuntime
        from nodeau.adapters.llama_server import LlamaServerRuntime, ModelServer

        choice = self.choice
        simulated = self._settings.simulated_gpus is not None
        memory = None if simulated else self.inventory.process_memory
        if choice.server is ModelServer.LLAMA_CPP_PYTHON:
            return LlamaCppPythonRuntime(
                choice.program,
                library=choice.library,
                inventory_memory=memory,
                environ=self._settings.environ,
            )
        return LlamaServerRuntime(
            choice.program, inventory_memory=memory, environ=self._settings.environ
        )

    @cached_property
    def processes(self) -> LocalServerProcesses:
        from nodeau.adapters.model_server_process import LocalServerProcesses

        return LocalServerProcesses(self._settings.environ)

    @cached_property
    def endpoints(self) -> LoopbackEndpoints:
        from nodeau.adapters.endpoint_services import endpoint_manager

        return endpoint_manager(self._settings)

    def endpoint_listens(self, port: int) -> bool:
        from nodeau.adapters.loopback_port import listening

        return listening(port)

    @cached_property
    def watch(self) -> ServerWatch:
        from nodeau.adapters.server_search import HomeServerWatch

        return HomeServerWatch()

    @cached_property
    def server_logs(self) -> ServerLogs:
        from nodeau.adapters.server_logs import ServerLogFiles

        return ServerLogFiles()

    @cached_property
    def fit_estimates(self) -> FitEstimates:
        from nodeau.adapters.runtime_estimate import FitTool

        return FitTool(self._settings.environ)

    @cached_property
    def identity(self) -> Identity:
        from nodeau.adapters.local_identity import LocalIdentity

        return LocalIdentity()

    @cached_property
    def organisation_policy(self) -> OrganisationPolicy:
        from nodeau.adapters.organisation_file import FileOrganisationPolicy

        return FileOrganisationPolicy(self._settings.home)

    @cached_property
    def entitlements(self) -> EntitlementStore:
        from nodeau.adapters.entitlement_file import FileEntitlementStore

        return FileEntitlementStore(self._settings.home)

    @cached_property
    def verifier(self) -> EntitlementVerifier:
        from nodeau.adapters.entitlement_document import compiled_in_verifier

        return compiled_in_verifier() if self._verifier is None else self._verifier


def machine_parts() -> LazyMachineParts:
    """This machine's adapters, built from this command's settings as each is first used."""
    return LazyMachineParts(settings())


def model_services() -> ModelServices:
    """The model side's adapters, built from this command's settings."""
    from nodeau.apps.models import bootstrap as models

    return models.build(settings())


def fetch_progress(name: str) -> AbstractContextManager[FetchProgress]:
    """A fetch's progress on stderr: a bar on a terminal, plain lines elsewhere."""
    from nodeau.adapters import progress

    return progress.fetch_progress(name)


def build_progress() -> AbstractContextManager[BuildProgress]:
    """An install's or an import's steps on stderr: bars on a terminal, plain lines
    elsewhere."""
    from nodeau.adapters import progress

    return progress.build_progress()


def card_capabilities(s: Settings) -> dict[str, str]:
    """This machine's cards' compute capabilities (NVML), by UUID; none where cards are
    simulated."""
    if s.simulated_gpus is not None:
        return {}
    from nodeau.adapters.nvml_inventory import NvmlGpuInventory

    return NvmlGpuInventory(s.machine).compute_capabilities()


def server_installer(jobs: int | None) -> ServerInstaller:
    """What builds llama-server into this user's cache (``jobs`` compiles at once; None:
    one per core)."""
    from nodeau.adapters.llama_build import LlamaServerBuilder
    from nodeau.adapters.llama_server import cache_home, server_cache

    env = settings().environ
    return LlamaServerBuilder(
        server_cache(env), cuda_cache=cache_home(env) / "cuda", environ=env, jobs=jobs
    )


def fleet_source(choice: PlaneChoice) -> FleetSource | None:
    """The fleet a loopback endpoint or the gateway routes to, as this command reaches it
    (None: this machine)."""
    if not choice.kubernetes:
        return None
    from nodeau.adapters.service_specs import FleetSource

    context = open_cluster(choice).context
    return FleetSource(kubeconfig=kubeconfig_of(choice, settings().environ), context=context)


def open_gateway(
    port: int | None, origins: tuple[str, ...] | None, fleet: FleetSource | None
) -> Gateway:
    """Start the gateway as asked (or find it running so) for this home."""
    from nodeau.adapters.endpoint_services import open_gateway as opened

    return opened(settings(), port, origins, fleet=fleet)


def close_gateway() -> bool:
    """Stop this home's gateway; whether it was running."""
    from nodeau.adapters.endpoint_services import close_gateway as closed

    return closed(settings())


def open_dashboard() -> Opened:
    """Give this home's dashboard a fresh token, and start it unless it runs already."""
    from nodeau.adapters.dashboard_service import open_dashboard as opened

    return opened(settings())


def close_dashboard() -> bool:
    """Stop this home's dashboard; whether it was running."""
    from nodeau.adapters.dashboard_service import close_dashboard as closed

    return closed(settings())


def plane_choice() -> PlaneChoice:
    """Which plane this command acts on: NODEAU_PLANE, else plane.json, else this machine."""
    return cluster_plane.plane_choice()


def open_cluster(choice: PlaneChoice | None = None, identity: str = "nodeau-cli") -> FleetCluster:
    """Connect as the plane choice says, print the banner line to stderr, and give the
    cluster's ports."""
    from nodeau.adapters.kube.batch_results import KubeFleetBatches
    from nodeau.adapters.kube.bootstrap_tokens import KubeBootstrapTokens
    from nodeau.adapters.kube.client import connect
    from nodeau.adapters.kube.copies import KubeModelCopies
    from nodeau.adapters.kube.entitlement import KubeEntitlementStore
    from nodeau.adapters.kube.health_store import KubeHealthRecords
    from nodeau.adapters.kube.identity import KubeIdentity
    from nodeau.adapters.kube.ledger import KubeReservationLedger
    from nodeau.adapters.kube.marks import KubeFleetMarks
    from nodeau.adapters.kube.organisation import KubeOrganisationPolicy
    from nodeau.adapters.kube.pods import KubeServerPods
    from nodeau.adapters.kube.qualifications import KubeQualificationRecords
    from nodeau.adapters.kube.reports import KubeMachineReports
    from nodeau.adapters.kube.resources import CONTROL_PLANE_LABEL, SERVER_IMAGE
    from nodeau.adapters.kube.workloads import KubeWorkloadObjects
    from nodeau.apps.planes.kubernetes import FleetCluster, banner

    environ = settings().environ
    c = choice if choice is not None else plane_choice()
    connection = connect(c.kubeconfig, c.context, environ)
    print(banner(connection.server, connection.context), file=sys.stderr, flush=True)
    api = connection.api
    return FleetCluster(
        server=connection.server,
        context=connection.context,
        objects=KubeWorkloadObjects(api, identity=identity),
        marks=KubeFleetMarks(api),
        reports=KubeMachineReports(api),
        health=KubeHealthRecords(api),
        ledger=KubeReservationLedger(api),
        tokens=KubeBootstrapTokens(api),
        pods=KubeServerPods(api),
        control_plane_label=CONTROL_PLANE_LABEL,
        server_image=SERVER_IMAGE,
        copies=KubeModelCopies(api),
        entitlements=KubeEntitlementStore(api),
        qualifications=KubeQualificationRecords(api),
        organisation=KubeOrganisationPolicy(api),
        identity=KubeIdentity(api),
        batches=KubeFleetBatches(api),
    )


def entitlement_verifier(trusted_keys: Mapping[str, bytes] | None = None) -> EntitlementVerifier:
    """The verifier of entitlements: the keys compiled into the package, unless a caller in
    this process (a test) passes its own. Nothing read from outside adds a key."""
    from nodeau.adapters.entitlement_document import Ed25519EntitlementVerifier
    from nodeau.adapters.entitlement_keys import PRODUCTION_KEYS

    return Ed25519EntitlementVerifier(PRODUCTION_KEYS if trusted_keys is None else trusted_keys)


def workloads() -> tuple[WorkloadView, ...]:
    """What ``nodeau ps`` lists on the plane this command acts on; on one machine, without
    building the plane (its listing is all ``ps`` needs, and the plane imports every
    command's views)."""
    if plane_choice().kubernetes:
        return plane().serving.workloads()
    s = settings()
    return MachineWorkloads(s, LazyMachineParts(s), utc_now).views()


def plane(*, trusted_keys: Mapping[str, bytes] | None = None) -> Plane:
    """The plane this command acts on (``plane_choice``); a command asks once.

    ``trusted_keys``: the entitlement keys to trust instead of the compiled-in ones, for a
    caller in this process (tests); the command line has no way to pass any."""
    choice = plane_choice()
    # None: the plane builds the compiled-in verifier when a plan command needs it (ps stays light)
    verifier = None if trusted_keys is None else entitlement_verifier(trusted_keys)
    if choice.kubernetes:
        from nodeau.adapters.endpoint_services import fleet_endpoint_manager
        from nodeau.adapters.service_specs import FleetSource
        from nodeau.apps.planes.kubernetes import KubernetesPlane
        from nodeau.apps.qualification.fleet import FleetProbes

        cluster = open_cluster(choice)
        s = settings()
        source = FleetSource(kubeconfig=kubeconfig_of(choice, s.environ), context=cluster.context)
        endpoints = fleet_endpoint_manager(s, source)

        def models() -> ModelServices:
            from nodeau.apps.models import bootstrap as model_services

            return model_services.build(s)

        def catalog() -> Catalog:
            return models().catalog()

        def keys() -> EntitlementVerifier:
            from nodeau.adapters.entitlement_document import compiled_in_verifier

            return compiled_in_verifier() if verifier is None else verifier

        def probes() -> FleetProbes:
            from nodeau.adapters.probe_client import answers_health, run_probes

            return FleetProbes(probe=run_probes, healthy=answers_health)

        return KubernetesPlane(
            cluster,
            utc_now,
            endpoints,
            verifier=keys,
            catalog=catalog,
            models=models,
            probes=probes,
        )
    from nodeau.apps.planes.machine import MachinePlane

    s = settings()
    return MachinePlane(s, LazyMachineParts(s, verifier), utc_now)
