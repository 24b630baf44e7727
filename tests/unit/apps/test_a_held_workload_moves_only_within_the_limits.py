"""A workload that holds cards already is moved or copied only while the organisation's
limits still permit its shape (its model, context and size); who asked was checked when it
was admitted, and its own spending is not counted against it again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from returns.result import Success

from nodeau.adapters.kube.report_form import MachineArtifact, MachineReport
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.fleet_admission import Planning, planning, still_permitted
from nodeau.domain.fleet_reports import MarkedFleet
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.limits import OrgLimits, Role
from nodeau.domain.memory import GIB
from nodeau.domain.organisation import Organisation
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from tests.support.builders.summaries import SUMMARY

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
QWEN = "ab" * 32


def planned() -> Planning:
    gpu = Gpu(uuid="GPU-m1-0", model="NVIDIA L4", total_bytes=24 * GIB)
    report = MachineReport(
        reading=MachineReading(
            machine="m1",
            gpus=(GpuReading(gpu=gpu, free_bytes=24 * GIB, driver_version="550"),),
            simulated=True,
            note="",
        ),
        at=NOW,
        artifacts=(
            MachineArtifact(
                id=QWEN, names=("qwen",), size_bytes=4 * GIB, path="/m/q.gguf", summary=SUMMARY
            ),
        ),
    )
    ask = WorkloadAsk(
        kind=WorkloadKind.SERVICE,
        name="chat",
        model="qwen",
        task=Task.CHAT,
        context_tokens=2048,
        recovery=RecoveryMode.AUTOMATIC,
        recovery_after=timedelta(minutes=3),
        endpoint_stopped=False,
    )
    marks = MarkedFleet(
        nodes=("m1",),
        drained=frozenset(),
        upgrading=frozenset(),
        control_plane=frozenset(),
        settings=SchedulingSettings(),
    )
    return planning(ask, reports=(report,), marks=marks, health={}, plan=ENTERPRISE).unwrap()


def test_no_policy_and_a_policy_that_permits_it_leave_the_planning_as_it_is() -> None:
    found = planned()
    assert still_permitted(found, None) == Success(found)
    viewer = Organisation(everyone=Role.VIEWER, limits=OrgLimits(max_context_tokens=2048))
    assert still_permitted(found, viewer) == Success(found)


def test_a_model_no_longer_permitted_or_a_context_now_over_the_limit_is_not_moved() -> None:
    found = planned()
    other = Organisation(limits=OrgLimits(allowed_models=frozenset({"llama"})))
    refused = still_permitted(found, other)
    assert refused.failure().code is ReasonCode.MODEL_NOT_PERMITTED
    shorter = Organisation(limits=OrgLimits(max_context_tokens=1024), contact="#gpu")
    refused = still_permitted(found, shorter)
    assert refused.failure().code is ReasonCode.CONTEXT_OVER_LIMIT
    assert refused.failure().sentence.endswith("; ask #gpu.")
