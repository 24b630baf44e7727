"""Each Pod's memory on its card, from the agent's samples to the report the fleet reads.

Cards are the NVML adapter over ``FakeNvml``; Pods are named by the real cgroup adapter from
``/proc``-shaped files. That real NVML lists a real Pod is proven only on a machine with a card.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pynvml  # type: ignore[import-untyped]
import pytest
from attrs import evolve

from nodeau.adapters.kube.report_form import parse_report, report_json
from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.adapters.pod_cgroup import ProcCgroupPods
from nodeau.adapters.record_json import RecordError
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.apps.agent.memory import PodMemoryWatch
from nodeau.apps.qualification.fleet import PeakAnswer, pod_peak_in
from nodeau.domain.hardware import PodMemory
from nodeau.domain.memory import GIB, MIB
from tests.support.clock import ticking
from tests.support.fakes.agents import MACHINE, T0, agent
from tests.support.fakes.fake_cluster import FakeCluster, machine_report
from tests.support.fakes.fake_nvml import H100_UUID, L4_UUID, FakeNvml, nvml_error, two_cards

POD_A = "0b8a0e3e-2f0c-4a2b-9a5d-3b2f1c6e7d8a"
POD_B = "11111111-2222-3333-4444-555555555555"


def in_pod(proc: Path, pid: int, uid: str) -> None:
    """Process ``pid`` in Pod ``uid``, as a systemd-driven kubelet on cgroup v2 puts it."""
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    escaped = uid.replace("-", "_")
    (proc / str(pid) / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice/"
        "cri-containerd-0123abcd.scope\n",
        encoding="utf-8",
    )


def on_host(proc: Path, pid: int) -> None:
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "cgroup").write_text("0::/system.slice/nvidia-persistenced.service\n")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    in_pod(root, 100, POD_A)
    in_pod(root, 101, POD_A)  # a helper process of the same Pod
    in_pod(root, 200, POD_B)
    on_host(root, 300)
    return root


def watch_of(nvml: FakeNvml, proc: Path) -> PodMemoryWatch:
    return PodMemoryWatch(
        processes=NvmlGpuInventory(MACHINE, nvml=nvml),
        pods=ProcCgroupPods(proc),
        clock=ticking(T0 + timedelta(seconds=1)),
    )


def test_samples_keep_each_pods_peak_per_card_and_leave_out_processes_of_no_pod(
    proc: Path,
) -> None:
    nvml = two_cards(processes={0: [(100, 700 * MIB), (101, 20 * MIB), (300, 64 * MIB)],
                                1: [(200, GIB)]})  # fmt: skip
    watch = watch_of(nvml, proc)
    watch.sample()
    nvml.processes = {0: [(100, 500 * MIB)], 1: [(200, GIB), (999, GIB)]}  # 999: ended
    watch.sample()
    assert watch.memory() == (
        PodMemory(pod_uid=POD_A, gpu_uuid=H100_UUID, used_bytes=500 * MIB,
                  peak_bytes=720 * MIB),
        PodMemory(pod_uid=POD_B, gpu_uuid=L4_UUID, used_bytes=GIB, peak_bytes=GIB),
    )  # fmt: skip
    assert watch.problem() is None
    assert (nvml.inits, nvml.shutdowns) == (2, 2)


def test_a_sample_that_fails_keeps_what_was_seen_and_says_why(proc: Path) -> None:
    nvml = two_cards(processes={0: [(100, 700 * MIB)]})
    watch = watch_of(nvml, proc)
    watch.sample()
    nvml.fail = {"nvmlDeviceGetComputeRunningProcesses": nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)}
    watch.sample()
    assert [m.peak_bytes for m in watch.memory()] == [700 * MIB]
    assert watch.problem() == (
        "cannot read the model servers' memory: "
        f"NVML on {MACHINE}: cannot list the cards' processes: GPU is lost"
    )
    nvml.fail = {}
    watch.sample()
    assert watch.problem() is None


def test_the_watch_thread_samples_until_stopped(proc: Path) -> None:
    nvml = two_cards(processes={0: [(100, 700 * MIB)]})
    watch = PodMemoryWatch(
        processes=NvmlGpuInventory(MACHINE, nvml=nvml), pods=ProcCgroupPods(proc),
        clock=ticking(T0 + timedelta(seconds=1)), interval_s=0.01,
    )  # fmt: skip
    watch.start()  # its first sample is taken before it returns
    assert [m.pod_uid for m in watch.memory()] == [POD_A]
    watch.stop()
    stopped = nvml.inits
    assert stopped >= 1 and nvml.shutdowns == stopped


def test_a_round_publishes_what_each_pod_holds_and_simulated_cards_report_none(
    proc: Path, tmp_path: Path
) -> None:
    cluster = FakeCluster(lambda: T0)
    cluster.add_node(MACHINE)
    nvml = two_cards(processes={0: [(100, 700 * MIB)]})
    watch = watch_of(nvml, proc)
    watch.sample()
    assert agent(NvmlGpuInventory(MACHINE, nvml=nvml), cluster, tmp_path, watch).round()
    [report] = cluster.reports.read().reports
    assert report.pods == (
        PodMemory(pod_uid=POD_A, gpu_uuid=H100_UUID, used_bytes=700 * MIB, peak_bytes=700 * MIB),
    )
    simulated = SimulatedGpuInventory(MACHINE, "1 x 24 GiB")
    assert agent(simulated, cluster, tmp_path, None).round()
    [report] = cluster.reports.read().reports
    assert report.reading.simulated and report.pods == ()


def test_the_reports_json_carries_the_pods_and_an_older_report_reads_as_none() -> None:
    report = evolve(
        machine_report(MACHINE, 1, at=T0),
        pods=(PodMemory(pod_uid=POD_A, gpu_uuid="G", used_bytes=0, peak_bytes=5),),
    )
    text = report_json(report)
    assert json.loads(text)["pods"] == [
        {"pod_uid": POD_A, "gpu_uuid": "G", "used_bytes": 0, "peak_bytes": 5}
    ]
    assert parse_report(text, "the test's report") == report
    older = {k: v for k, v in json.loads(text).items() if k != "pods"}
    assert parse_report(json.dumps(older), "an older report").pods == ()
    broken = json.loads(text)
    broken["pods"][0]["used_bytes"] = 6  # more than its peak
    with pytest.raises(RecordError, match=r"a broken report is not a readable report: .*pods"):
        parse_report(json.dumps(broken), "a broken report")


def test_fleet_qualification_reads_a_pods_peak_only_from_a_report_after_the_probes() -> None:
    card = machine_report(MACHINE, 1, at=T0)
    real = evolve(card, reading=evolve(card.reading, simulated=False))
    uuid = real.reading.gpus[0].gpu.uuid
    held = (PodMemory(pod_uid=POD_A, gpu_uuid=uuid, used_bytes=GIB, peak_bytes=2 * GIB),)
    ended = T0
    assert pod_peak_in([evolve(real, pods=held)], MACHINE, POD_A, uuid, ended) == PeakAnswer(
        answered=False
    )  # that report is not after the probes' end
    after = evolve(real, at=T0 + timedelta(seconds=1), pods=held)
    assert pod_peak_in([after], MACHINE, POD_A, uuid, ended) == PeakAnswer(
        answered=True, peak_bytes=2 * GIB
    )
    assert pod_peak_in([after], MACHINE, POD_B, uuid, ended) == PeakAnswer(answered=True)
    assert pod_peak_in([after], MACHINE, POD_A, "GPU-other", ended) == PeakAnswer(answered=True)
    assert pod_peak_in([after], "attic", POD_A, uuid, ended) == PeakAnswer(answered=False)
    simulated = evolve(card, at=T0 + timedelta(seconds=1), pods=held)
    assert pod_peak_in([simulated], MACHINE, POD_A, uuid, ended) == PeakAnswer(answered=True)
