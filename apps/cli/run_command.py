"""The bodies of ``nodeau run`` and ``nodeau stop``: decide, then carry the decision out."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from returns.pipeline import is_successful
from returns.result import Failure, Result

from nodeau.apps.cli.bootstrap import utc_now
from nodeau.apps.cli.endpoints import endpoint_manager
from nodeau.apps.cli.plane import Plane
from nodeau.apps.cli.render import size, to_json
from nodeau.apps.cli.serving import report_refusal
from nodeau.apps.models import Resolved, resolve_model
from nodeau.apps.serving import (
    RunRequest,
    decide_run,
    no_verified_copy,
    start_server,
    stop_workload,
)
from nodeau.domain.hardware import MachineReading
from nodeau.domain.memory import predictor
from nodeau.domain.model_info import runtime_config
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.refusals import Refusal
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadState
from nodeau.ports.state import Admission, Snapshot, UnknownWorkload


def run_workload(
    plane: Plane,
    *,
    model: str,
    name: str | None,
    task: str,
    context: int | None,
    recovery: str,
    after: timedelta,
    json: bool,
) -> int:
    s = plane.models.settings
    resolved = resolve_model(model, plane.models.registry.book(), plane.models.catalog())
    workload = name or resolved.display_name
    existing = plane.state.snapshot().named(workload)
    endpoints = endpoint_manager(s)
    if existing is not None and existing.workload.state is WorkloadState.SERVING:
        # the model is still loaded: starting again only brings its endpoint back
        endpoints.start(workload, existing.endpoint_port or 0)
        print(
            f"{workload} is already serving; its endpoint is back at "
            f"http://127.0.0.1:{existing.endpoint_port}/v1"
        )
        return 0
    request = RunRequest(
        name=workload,
        task=Task(task),
        context_tokens=context,
        recovery=RecoveryMode(recovery),
        recovery_after=after,
    )
    decided, reading = admit_here(plane, resolved, request)
    if not is_successful(decided) or reading is None:
        return refused(decided.failure())
    admission = decided.unwrap()
    port = existing.endpoint_port if existing and existing.endpoint_port else endpoints.free_port()
    record = start_server(
        admission,
        reading=reading,
        runtime=plane.runtime(),
        state=plane.state,
        log_dir=s.log_dir,
        now=utc_now,
        endpoint_port=port,
    )
    how = endpoints.start(workload, port)
    if json:
        print(to_json({"record": record, "endpoint_service": how}))
        return 0
    needed = admission.placement.reservation.bytes
    source = admission.admitted.prediction_for(
        next(
            c.gpu_model for c in admission.admitted.cards if c.gpu_uuid == record.workload.gpu_uuid
        )
    ).source.value
    hardware = " (SIMULATED card: the model runs on the CPU)" if reading.simulated else ""
    print(
        f"{workload}: admitted on {record.workload.machine}, {record.workload.gpu_uuid}{hardware}, "
        f"reserving {size(needed)} ({source})"
    )
    print(f"serving at http://127.0.0.1:{record.endpoint_port}/v1 (endpoint: {how})")
    return 0


Wrap = Callable[
    [Callable[[Snapshot], Result[Admission, Refusal]]],
    Callable[[Snapshot], Result[Admission, Refusal]],
]


def admit_here(
    plane: Plane, resolved: Resolved, request: RunRequest, wrap: Wrap | None = None
) -> tuple[Result[Admission, Refusal], MachineReading | None]:
    """Admission and placement on this machine, recorded in one state transaction.

    The model must be verified here (its architecture values are read from the
    file); ``wrap`` adjusts the decision (a batch job records its own kind).
    """
    s = plane.models.settings
    path = plane.models.store.verified_path(resolved.artifact.files[0].sha256)
    if path is None:
        return Failure(no_verified_copy(request.name, s.machine)), None
    summary = plane.models.inspector.inspect(path)
    config = runtime_config(summary, request.task, request.context_tokens)
    reading = plane.inventory.read()
    decide = decide_run(
        request=request,
        resolved=resolved,
        model_path=path,
        config=config,
        reading=reading,
        predict=predictor(
            arch=summary.architecture,
            artifact_id=resolved.artifact.id.hex,
            artifact_bytes=resolved.artifact.size_bytes,
            config=config,
            table=plane.models.registry.measurements(),
            allowances=s.allowances,
        ),
        settings=SchedulingSettings(),
        now=utc_now(),
    )
    return plane.state.admit(decide if wrap is None else wrap(decide)), reading


def refused(refusal: Refusal) -> int:
    """Print a refusal's kind, code and sentence; the exit code of a refusal."""
    return report_refusal(refusal.kind.value, refusal.code.value, refusal.sentence)


def stop_command(plane: Plane, name: str, *, stop_model: bool) -> int:
    record = plane.state.snapshot().named(name)
    if record is None:
        raise UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
    endpoint_manager(plane.models.settings).stop(name)
    if not stop_model:
        print(
            f"{name}: endpoint stopped; the model stays loaded (nodeau run starts it again "
            "at once; --workload frees the card)"
        )
        return 0
    released = stop_workload(name, state=plane.state, runtime=plane.runtime(), now=utc_now)
    print(f"{name}: endpoint and model stopped; {released.workload.gpu_uuid} is free")
    return 0
