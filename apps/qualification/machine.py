"""``QualificationCommands`` on one machine: a qualification started by the normal admission,
its memory watched, each capability probed, what it started stopped and the evidence kept;
``model info`` from this machine's registry, catalog and verified copy.

Why it is so: docs/adr/decisions/apps.md (apps/qualification/machine.py).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps.models.actions import Resolved, describe_model, resolve_model
from nodeau.apps.models.services import ModelServices
from nodeau.apps.qualification.commands import (
    THIS_MACHINE,
    ModelInfoView,
    Probe,
    QualificationView,
    info_view,
    not_started,
    qualification_view,
)
from nodeau.apps.serving.commands import Refused
from nodeau.apps.serving.model_servers import (
    Rules,
    RunRequest,
    admit_on_this_machine,
    launch_server,
    no_verified_copy,
    record_serving,
    stop_workload,
)
from nodeau.apps.settings import Settings
from nodeau.domain.catalog import catalog_claims
from nodeau.domain.marking import Marks
from nodeau.domain.model_server import ServerAbilities
from nodeau.domain.qualification import (
    MemoryReading,
    MemorySource,
    ProbeResult,
    QualificationEvidence,
    card_measurements,
    qualification_plan,
)
from nodeau.domain.records import Admission, Starter
from nodeau.domain.refusals import Refusal
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.runtime import ModelRuntime, RunningServer, RuntimeFailure
from nodeau.ports.state import StateStore

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts


def qualify_on_this_machine(
    parts: MachineParts,
    settings: Settings,
    clock: Callable[[], datetime],
    rules: Rules,
    model: str,
    context_tokens: int | None,
    seed: int | None,
) -> QualificationView | Refused:
    models = parts.models
    resolved = resolve_model(model, models.registry.book(), models.catalog())
    qualify_parts = QualifyParts(
        models=models,
        inventory=parts.inventory,
        state=parts.state,
        runtime=parts.runtime,
        server=parts.server,
        marks=parts.marks.read(),
        log_dir=settings.log_dir,
        clock=clock,
        probe=parts.qualifying.probe,
        reported_bytes=parts.qualifying.reported_bytes,
        runtime_name=parts.qualifying.runtime_name,
        rules=rules,
        starter=parts.starter,
    )
    drawn = seed if seed is not None else random.SystemRandom().randrange(2**32)
    done = qualify(resolved, context_tokens, qualify_parts, drawn)
    if isinstance(done, Refusal):
        return Refused(name=resolved.display_name, refusal=done)
    return qualification_view(resolved.display_name, done)


@frozen(kw_only=True)
class ThisMachineQualification:
    """``QualificationCommands`` where the plane is this machine; ``rules`` are the plan's
    and the organisation's, asked when a qualification starts."""

    _settings: Settings
    _parts: MachineParts
    _clock: Callable[[], datetime]
    _rules: Callable[[], Rules]

    def qualify(
        self, model: str, context_tokens: int | None, seed: int | None = None
    ) -> QualificationView | Refused:
        return qualify_on_this_machine(
            self._parts, self._settings, self._clock, self._rules(), model, context_tokens, seed
        )

    def info(self, model: str) -> ModelInfoView:
        """From this machine's registry, catalog and verified copy (none: a one-line error)."""
        models = self._parts.models
        catalog = models.catalog()
        resolved = resolve_model(model, models.registry.book(), catalog, models.store.files())
        described = describe_model(
            resolved,
            store=models.store,
            inspector=models.inspector,
            registry=models.registry,
            allowances=self._settings.allowances,
            catalog_capabilities=catalog_claims(catalog, resolved.artifact.id.hex),
        )
        return info_view(
            described,
            model=resolved.display_name,
            names=resolved.names,
            table=models.registry.measurements(),
            architecture_from=THIS_MACHINE,
        )


SAMPLE_S = 0.25  # how often a card's memory is read while the probes run
STOP_GRACE_S = 10.0
NAME_PREFIX = "qualify-"


ReportedBytes = Callable[[Path], int | None]  # the buffers a server's log reports, if any


@frozen(kw_only=True)
class QualifyTools:
    """How this machine probes and watches a model server it qualifies."""

    probe: Probe  # base URL, task, model id, randomness: each probe's result
    reported_bytes: ReportedBytes
    runtime_name: Callable[[RunningServer], str]  # the model server and its version


@frozen(kw_only=True)
class QualifyParts:
    """What a qualification uses on this machine."""

    models: ModelServices
    inventory: GpuInventory
    state: StateStore
    runtime: ModelRuntime
    server: ServerAbilities  # what that model server can use (a real card only if it can)
    marks: Marks
    log_dir: Path
    clock: Callable[[], datetime]
    probe: Probe  # base URL, task, model id, randomness: each probe's result
    reported_bytes: ReportedBytes
    runtime_name: Callable[[RunningServer], str]  # the model server and its version
    rules: Rules  # the plan, the organisation's policy and who asks, as for nodeau run
    starter: Starter  # this process, as the one starting each model server


def qualify(
    resolved: Resolved,
    context_tokens: int | None,
    parts: QualifyParts,
    seed: int,
) -> QualificationEvidence | Refusal:
    """Qualify the model: its evidence (also recorded), or the refusal that stopped it.
    Every probe's content is drawn from ``seed`` (kept in the evidence)."""
    rng = random.Random(seed)
    path = parts.models.store.verified_path(resolved.artifact.files[0].sha256)
    name = NAME_PREFIX + resolved.artifact.id.hex[:12]
    if path is None:
        return no_verified_copy(resolved.display_name, parts.models.settings.machine)
    plan = qualification_plan(parts.models.inspector.inspect(path).architecture.name)
    results: list[ProbeResult] = list(plan.not_applicable)
    memory: list[MemoryReading] = []
    card = "no card"
    runtime = "the model server"
    context = 0
    for task in plan.tasks:
        decided = _admit(resolved, name, task, context_tokens, parts)
        if isinstance(decided, Refusal):
            return decided
        admission, simulated = decided
        card = _card_model(admission, parts.inventory, simulated)
        context = context or admission.record.config.context_tokens
        run = _probe_one(admission, simulated, resolved, task, parts, rng)
        results.extend(run.results)
        runtime = run.runtime or runtime
        if run.memory is not None:
            memory.append(run.memory)
    evidence = QualificationEvidence(
        artifact_id=resolved.artifact.id,
        gpu_model=card,
        runtime=runtime,
        at=parts.clock(),
        context_tokens=context,
        memory=tuple(memory),
        probes=tuple(results),
        seed=seed,
    )
    parts.models.registry.record_evidence(evidence)
    for measured in card_measurements(evidence, note=f"qualification, {evidence.runtime}"):
        parts.models.registry.record_measurement(measured)
    return evidence


@frozen(kw_only=True)
class _Run:
    results: tuple[ProbeResult, ...]
    memory: MemoryReading | None
    runtime: str | None


def _admit(
    resolved: Resolved, name: str, task: Task, context: int | None, parts: QualifyParts
) -> tuple[Admission, bool] | Refusal:
    request = RunRequest(
        name=name,
        task=task,
        context_tokens=context,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=3),
        unproved=True,  # a qualification is how a model is proved
    )
    return admit_on_this_machine(
        resolved,
        request,
        kind=WorkloadKind.SERVICE,
        models=parts.models,
        inventory=parts.inventory,
        state=parts.state,
        marks=parts.marks,
        rules=parts.rules,
        server=parts.server,
        now=parts.clock(),
    )


def _probe_one(
    admission: Admission,
    simulated: bool,
    resolved: Resolved,
    task: Task,
    parts: QualifyParts,
    rng: random.Random,
) -> _Run:
    """Start one server, probe it while its memory is watched, and stop it."""
    name = admission.record.workload.name
    try:
        server = launch_server(
            admission,
            simulated=simulated,
            runtime=parts.runtime,
            state=parts.state,
            log_dir=parts.log_dir,
            now=parts.clock,
            starter=parts.starter,
            log_buffers=True,
        )
    except RuntimeFailure as failure:
        return _Run(results=not_started(task, str(failure)), memory=None, runtime=None)
    try:
        # recorded serving (no endpoint): ps shows it, and stop --workload can end it
        record_serving(parts.state, name, server, endpoint_port=0, at=parts.clock())
        watch = _Peak(parts.runtime, server) if not simulated else None
        try:
            results = parts.probe(server.base_url, task, name, rng, headers=server.auth_headers)
        finally:
            peak = watch.stop() if watch is not None else None
        config_key = admission.record.config.key()
        reading: MemoryReading | None
        if peak is not None:
            reading = MemoryReading(
                task=task, config_key=config_key, peak_bytes=peak, source=MemorySource.NVML
            )
        else:
            reported = parts.reported_bytes(parts.log_dir / f"{name}.log")
            reading = (
                MemoryReading(
                    task=task,
                    config_key=config_key,
                    peak_bytes=reported,
                    source=MemorySource.RUNTIME_BUFFERS,
                )
                if reported
                else None
            )
        return _Run(results=results, memory=reading, runtime=parts.runtime_name(server))
    finally:
        parts.runtime.stop(server, grace_s=STOP_GRACE_S)  # whatever the record says
        stop_workload(name, state=parts.state, runtime=parts.runtime, now=parts.clock)


def _card_model(admission: Admission, inventory: GpuInventory, simulated: bool) -> str:
    uuid = admission.record.workload.gpu_uuid
    model = next((r.gpu.model for r in inventory.read().gpus if r.gpu.uuid == uuid), None)
    named = model or "an unnamed card"
    return f"{named} (simulated: the model ran on the CPU)" if simulated else named


class _Peak:
    """Reads a server's memory on its card every ``SAMPLE_S`` until stopped; its peak."""

    def __init__(self, runtime: ModelRuntime, server: RunningServer) -> None:
        self._runtime = runtime
        self._server = server
        self._peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        use = self._runtime.memory(self._server)
        if use is not None and use.source == MemorySource.NVML.value:
            self._peak = max(self._peak, use.bytes)

    def _watch(self) -> None:
        self._read()
        while not self._done.wait(SAMPLE_S):
            self._read()

    def stop(self) -> int | None:
        self._done.set()
        self._thread.join()
        self._read()
        return self._peak or None
