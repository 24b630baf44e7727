"""On a real API server: a real card only where its machine's model server can use it.

Two KWOK machines report a real card each, with their image's probe answer (deploy/40-agent.yaml):
the controller places on the CUDA one and refuses the CPU-only one.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.pods import list_pods
from nodeau.adapters.kube.reports import publish_report
from nodeau.adapters.server_abilities import from_answer
from nodeau.domain.hardware import GpuReading
from tests.support.fakes.server_answers import CPU_ANSWER, CUDA_ANSWER
from tests.support.real.kube_controller import controller, create, report, settle, small, status
from tests.support.real.kube_nodes import kwok_node

SEES = from_answer("version: 0.5.0-dev (build 1, commit 0c1e570)\n" + CUDA_ANSWER,
                   r.CUDA_SERVER_IMAGE)  # fmt: skip
CPU_IMAGE = from_answer("version: 0.5.0-dev (build 1, commit 0c1e570)\n" + CPU_ANSWER,
                        r.SERVER_IMAGE)  # fmt: skip


def real_machine(api: Any, name: str, server: object) -> str:
    """A KWOK node whose agent reports one real card and its server's answer; its card."""
    client.CoreV1Api(api).create_node(kwok_node(name))
    simulated = report(name, 1, small(name))
    reading = simulated.reading
    cards = tuple(
        GpuReading(gpu=evolve(g.gpu, uuid=f"GPU-{name}-real", simulated=False),
                   free_bytes=g.free_bytes, driver_version="580.65")
        for g in reading.gpus
    )  # fmt: skip
    real = evolve(reading, gpus=cards, simulated=False, note="1 NVIDIA GPU (NVML)")
    publish_report(api, evolve(simulated, reading=real, server=server))
    return cards[0].gpu.uuid


def test_the_cuda_image_serves_a_card_its_server_sees_and_no_other(fresh_fleet: Any) -> None:
    api = fresh_fleet
    card = real_machine(api, "h200", SEES)
    ctl = controller(api)
    create(api, "chat", "qwen", contextTokens=128)
    settle(ctl, lambda: status(api, "chat").get("state") in ("starting", "serving"), "placed")
    assert status(api, "chat")["gpuUUID"] == card
    pod = client.CoreV1Api(api).read_namespaced_pod("service-chat", r.NAMESPACE)
    [container] = pod.spec.containers
    assert container.image == r.CUDA_SERVER_IMAGE
    assert container.args[container.args.index("--n-gpu-layers") + 1] == "999"


def test_a_real_card_whose_server_cannot_use_it_is_refused(fresh_fleet: Any) -> None:
    api = fresh_fleet
    real_machine(api, "cpu-image", CPU_IMAGE)
    ctl = controller(api)
    create(api, "chat", "qwen", contextTokens=128)
    settle(ctl, lambda: status(api, "chat").get("state") == "refused", "refused")
    st = status(api, "chat")
    assert st["refusal"]["code"] == "capacity.server-cannot-use-card", st
    assert "cpu-image (its model server cannot use its cards" in st["refusal"]["message"]
    assert list_pods(api) == ()
