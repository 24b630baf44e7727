"""On a fleet, a real card is placed on only where a model server there can use it.

From the agent's report of its CUDA image's probe, the controller leaves out machines whose server
cannot use their cards, refusing with ``capacity.server-cannot-use-card`` when none is left; a
real card's Pod runs the CUDA image, a simulated card's the CPU image.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from attrs import evolve

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.pods import PodImages, pod_manifest
from nodeau.adapters.kube.report_form import MachineReport, parse_report, report_json
from nodeau.adapters.record_json import RecordError
from nodeau.adapters.server_abilities import answer_file, from_answer
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.apps.serving.commands import RunAsk
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.fleet_admission import decider as controller_decider
from nodeau.domain.hardware import Gpu, GpuReading, Machine, MachineReading
from nodeau.domain.memory import GIB
from nodeau.domain.model_server import SERVER_CANNOT, server_exclusions, uses_card
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.errors import NodeauError
from tests.support.builders.controller_decisions import EMPTY, SMALL, admitted, artifact, ask, marks
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.agents import MACHINE, agent
from tests.support.fakes.controller_fleet import fleet_plane
from tests.support.fakes.fake_cluster import FakeCluster
from tests.support.fakes.fake_runtime import CPU_ONLY, SEES_A_CARD
from tests.support.fakes.server_answers import CUDA_ANSWER, CUDA_NO_CARD

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
REAL = Gpu(uuid="GPU-1111", model="NVIDIA H200", total_bytes=141 * GIB)
SIM = Gpu(uuid="SIM-GPU-2222", model="Simulated GPU", total_bytes=24 * GIB, simulated=True)


def machine_report(name: str, *, real: bool, server: object = None) -> MachineReport:
    card = evolve(REAL if real else SIM, uuid=f"{'GPU' if real else 'SIM-GPU'}-{name}")
    reading = MachineReading(
        machine=name,
        gpus=(GpuReading(gpu=card, free_bytes=card.total_bytes, driver_version="580"),),
        simulated=not real,
        note="",
    )
    return MachineReport(
        reading=reading,
        at=NOW,
        artifacts=(artifact(SMALL, "qwen", path=f"/models/{name}/qwen.gguf"),),
        server=server,  # type: ignore[arg-type]
    )


def decide(*reports: MachineReport, cuda_image: bool = True) -> object:
    names = tuple(rep.reading.machine for rep in reports)
    chosen = controller_decider(
        ask(), reports=reports, marks=marks(*names), health={}, now=NOW, plan=ENTERPRISE,
        cuda_image=cuda_image,
    )  # fmt: skip
    return chosen(EMPTY)


@pytest.mark.parametrize(
    ("machine", "server", "cuda_image", "why"),
    [
        (Machine(name="m", gpus=(SIM,)), None, False, None),  # simulated: the CPU serves
        (Machine(name="m", gpus=(REAL,)), SEES_A_CARD, True, None),
        (Machine(name="m", gpus=(REAL,)), SEES_A_CARD, False, "no CUDA model-server image"),
        (Machine(name="m", gpus=(REAL,)), None, True, "its agent has not said"),
        (Machine(name="m", gpus=(REAL,)), CPU_ONLY, True, "fake-server 1.0: CPU only"),
        (Machine(name="m"), None, False, None),  # no card at all
    ],
)
def test_which_machines_are_left_out_for_their_model_server(
    machine: Machine, server: object, cuda_image: bool, why: str | None
) -> None:
    servers = {} if server is None else {"m": server}
    out = server_exclusions((machine,), servers, cuda_image=cuda_image)  # type: ignore[arg-type]
    if why is None:
        assert out == ()
    else:
        [(name, reason)] = out
        assert name == "m" and reason.startswith(f"{SERVER_CANNOT}: ") and why in reason


def test_a_real_card_with_a_server_that_sees_it_runs_the_cuda_image_on_the_card() -> None:
    said = from_answer(CUDA_ANSWER, r.CUDA_SERVER_IMAGE)
    record = admitted(decide(machine_report("m1", real=True, server=said))).record
    assert record.workload.gpu_uuid == "GPU-m1"
    images = PodImages(cuda_runtime_class="nvidia")
    pod = pod_manifest(record, "uid", images, on_card=True)
    [container] = pod["spec"]["containers"]
    assert container["image"] == r.CUDA_SERVER_IMAGE
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    args = container["args"]
    assert args[args.index("--n-gpu-layers") + 1] == "999"


@pytest.mark.parametrize(
    ("server", "cuda_image", "words"),
    [
        (from_answer(CUDA_NO_CARD, r.CUDA_SERVER_IMAGE), True, "no CUDA device seen"),
        (CPU_ONLY, True, "CPU only"),
        (None, True, "its agent has not said what its model server can use"),
        (from_answer(CUDA_ANSWER, r.CUDA_SERVER_IMAGE), False, "--cuda-server-image"),
    ],
)
def test_a_real_card_no_server_there_can_use_is_refused(
    server: object, cuda_image: bool, words: str
) -> None:
    result = decide(machine_report("m1", real=True, server=server), cuda_image=cuda_image)
    refusal = result.failure()  # type: ignore[attr-defined]
    assert refusal.code is ReasonCode.SERVER_CANNOT_USE_CARD
    assert words in refusal.sentence and "m1 (its model server cannot use its cards" in (
        refusal.sentence
    )


def test_a_simulated_card_is_chosen_over_a_real_one_nothing_can_use() -> None:
    chosen = admitted(decide(machine_report("real", real=True), machine_report("sim", real=False)))
    assert chosen.placement.machine == "sim"
    assert ("real", f"{SERVER_CANNOT}: its agent has not said what its model server can use") in (
        chosen.placement.excluded
    )
    pod = pod_manifest(chosen.record, "uid", PodImages(), on_card=False)
    [container] = pod["spec"]["containers"]
    assert container["image"] == r.SERVER_IMAGE
    assert container["args"][container["args"].index("--n-gpu-layers") + 1] == "0"
    assert "runtimeClassName" not in pod["spec"]


def test_no_cuda_image_means_no_pod_on_a_real_card() -> None:
    record = admitted(decide(machine_report("sim", real=False))).record
    with pytest.raises(ValueError, match="no CUDA server image is configured"):
        pod_manifest(record, "uid", PodImages(cuda_server=None), on_card=True)


def test_whether_a_server_uses_its_card_is_the_report_s_word() -> None:
    assert uses_card((Machine(name="m", gpus=(REAL,)), REAL), REAL.uuid)
    assert not uses_card((Machine(name="m", gpus=(SIM,)), SIM), SIM.uuid)
    assert uses_card(None, "GPU-gone") and not uses_card(None, "SIM-GPU-gone")


def test_the_server_s_answer_travels_in_the_report_and_is_read_as_written() -> None:
    said = from_answer(CUDA_ANSWER, r.CUDA_SERVER_IMAGE)
    report = machine_report("m1", real=True, server=said)
    text = report_json(report)
    assert parse_report(text, "Lease m1").server == said
    assert parse_report(report_json(evolve(report, server=None)), "Lease m1").server is None
    wire = json.loads(text)
    wire["server"]["backends"] = "CUDA"  # a string where a list belongs
    with pytest.raises(RecordError, match="not a readable report"):
        parse_report(json.dumps(wire), "Lease m1")


def test_the_agent_reports_its_probe_s_answer_and_says_when_there_is_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = FakeCluster(lambda: NOW)
    cluster.add_node(MACHINE)
    answer = tmp_path / "probe" / "answer.txt"
    probe = agent(SimulatedGpuInventory(MACHINE, "1 x 24 GiB"), cluster, tmp_path, None)
    probe.server = lambda: answer_file(answer, r.CUDA_SERVER_IMAGE)
    assert probe.round()  # the probe has not written: the report says nothing, one line says so
    [report] = cluster.reports.read().reports
    assert report.server is None
    assert "the model server has not answered yet" in capsys.readouterr().err
    answer.parent.mkdir()
    answer.write_text("version: 9.9.9 (build 7, commit abc1234)\n" + CUDA_ANSWER)
    assert probe.round()
    [report] = cluster.reports.read().reports
    assert report.server is not None and report.server.program == r.CUDA_SERVER_IMAGE
    assert [d.name for d in report.server.devices] == ["CUDA0", "CUDA1"]
    answer.write_text("exec /opt/llama-server/llama-server: no such file or directory\n")
    assert probe.round()  # a failed probe: left out, said, the rest still published
    assert cluster.reports.read().reports[0].server is None
    assert "no --list-devices answer in it" in capsys.readouterr().err


def test_cpu_asked_on_a_fleet_is_said_to_be_not_there_yet_and_creates_nothing() -> None:
    cluster = FakeCluster(lambda: NOW)
    cluster.add_node("m1")
    plane = fleet_plane(cluster)
    with pytest.raises(NodeauError, match=r"^--cpu is not on a fleet yet: .*nothing was created"):
        plane.serving.run(
            RunAsk(
                model="qwen",
                name="chat",
                task=Task.CHAT,
                context_tokens=None,
                recovery=RecoveryMode.NEVER,
                recovery_after=timedelta(minutes=3),
                on_cpu=True,
            )
        )
    assert cluster.objects.list_all() == ()


def test_a_split_on_real_cards_gives_its_pod_every_card_in_slot_order() -> None:
    said = from_answer(CUDA_ANSWER, r.CUDA_SERVER_IMAGE)
    cards = tuple(evolve(REAL, uuid=f"GPU-m1-{i}", total_bytes=24 * GIB) for i in range(3))
    reading = MachineReading(
        machine="m1",
        gpus=tuple(
            GpuReading(gpu=c, free_bytes=c.total_bytes, driver_version="580") for c in cards
        ),
        simulated=False,
        note="",
    )
    layers = LayerWeights(input_bytes=GIB // 2, layer_bytes=(19 * GIB,) * 2, output_bytes=GIB // 2)
    giant = evolve(artifact(SMALL, "qwen", gib=39), summary=evolve(SUMMARY, layers=layers))
    report = MachineReport(reading=reading, at=NOW, artifacts=(giant,), server=said)
    record = admitted(decide(report)).record
    w = record.workload
    assert w.cards == ("GPU-m1-0", "GPU-m1-1") and sum(w.tensor_split) == 3
    pod = pod_manifest(record, "uid", PodImages(), on_card=True)
    [container] = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"] == "GPU-m1-0,GPU-m1-1"
    args = container["args"]
    assert args[args.index("--split-mode") + 1] == "layer"
    assert args[args.index("--tensor-split") + 1] == ",".join(map(str, w.tensor_split))
    on_cpu = pod_manifest(record, "uid", PodImages(), on_card=False)["spec"]["containers"][0]
    assert "--tensor-split" not in on_cpu["args"]
    assert "CUDA_VISIBLE_DEVICES" not in {e["name"] for e in on_cpu["env"]}
