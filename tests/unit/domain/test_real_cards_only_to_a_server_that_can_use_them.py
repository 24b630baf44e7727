"""A real card goes only to a model server that can use it; the CPU when asked for it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.hardware import Gpu, Machine
from nodeau.domain.model_server import (
    CUDA,
    SERVER_CANNOT,
    ServerAbilities,
    ServerDevice,
    abilities_text,
    card_refusal,
    server_exclusions,
)
from nodeau.domain.refusals import ReasonCode, RefusalKind

GIB = 1 << 30
REAL = Gpu(uuid="GPU-6a2b3c4d-0000", model="NVIDIA H200", total_bytes=141 * GIB)
SIMULATED = Gpu(uuid="SIM-GPU-m1-0", model="Simulated GPU", total_bytes=24 * GIB, simulated=True)
H200 = ServerDevice(name="CUDA0", description="NVIDIA H200", total_bytes=143771 << 20)
CPU_ONLY = ServerAbilities(server="llama-server", program="/b/cpu/llama-server", version="0.5.0")
CUDA_SEES_CARD = ServerAbilities(
    server="llama-server",
    program="/b/cuda-90/llama-server",
    version="0.5.0",
    backends=(CUDA,),
    devices=(H200,),
)
CUDA_BLIND = ServerAbilities(
    server="llama-server",
    program="/b/cuda-90/llama-server",
    version="0.5.0",
    backends=(CUDA,),
    note="no CUDA-capable device is detected",
)
NOT_ASKED = ServerAbilities(
    server="llama-cpp-python",
    program="/venv/bin/python",
    version="(its package's)",
    known=False,
    note="llama-cpp-python's own libllama",
)


@pytest.mark.parametrize(
    ("server", "cards", "on_cpu", "refused"),
    [
        (CPU_ONLY, (REAL,), False, True),
        (CPU_ONLY, (REAL,), True, False),  # --cpu: the card is held, the model on the CPU
        (CPU_ONLY, (SIMULATED,), False, False),  # simulated cards never reach a server
        (CPU_ONLY, (), False, False),
        (CUDA_SEES_CARD, (REAL,), False, False),
        (CUDA_BLIND, (REAL,), False, True),
        (CUDA_BLIND, (REAL,), True, False),
        (NOT_ASKED, (REAL,), False, True),
        (NOT_ASKED, (SIMULATED,), False, False),
        (CPU_ONLY, (SIMULATED, REAL), False, True),
    ],
)
def test_who_gets_a_real_card(
    server: ServerAbilities, cards: tuple[Gpu, ...], on_cpu: bool, refused: bool
) -> None:
    refusal = card_refusal(server, cards, on_cpu=on_cpu)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.code is ReasonCode.SERVER_CANNOT_USE_CARD
        assert refusal.kind is RefusalKind.CAPACITY
        assert REAL.uuid in refusal.sentence and "--cpu" in refusal.sentence


def test_a_cpu_only_server_is_sent_to_the_cuda_install() -> None:
    refusal = card_refusal(CPU_ONLY, (REAL,), on_cpu=False)
    assert refusal is not None
    assert refusal.sentence == (
        "the model server llama-server 0.5.0 (/b/cpu/llama-server) is built for the CPU only: "
        "it cannot use GPU-6a2b3c4d-0000 (NVIDIA H200); build one that can with "
        "`nodeau server install --cuda`, or run it on the CPU with --cpu"
    )


def test_a_cuda_server_that_sees_no_card_says_what_it_said() -> None:
    refusal = card_refusal(CUDA_BLIND, (REAL,), on_cpu=False)
    assert refusal is not None
    assert "sees no CUDA device here (no CUDA-capable device is detected)" in refusal.sentence
    assert "nvidia-smi" in refusal.sentence


def test_a_server_nobody_could_ask_is_not_trusted_with_a_card() -> None:
    refusal = card_refusal(NOT_ASKED, (REAL,), on_cpu=False)
    assert refusal is not None
    assert refusal.sentence.startswith("Nodeau cannot ask the model server llama-cpp-python")


@pytest.mark.parametrize(
    ("server", "line"),
    [
        (CPU_ONLY, "llama-server 0.5.0: CPU only"),
        (CUDA_SEES_CARD, "llama-server 0.5.0: CUDA (CUDA0 NVIDIA H200, 140.4 GiB)"),
        (
            CUDA_BLIND,
            "llama-server 0.5.0: CUDA (no CUDA device seen: no CUDA-capable device is detected)",
        ),
        (
            NOT_ASKED,
            "llama-cpp-python (its package's): backends not known "
            "(llama-cpp-python's own libllama)",
        ),
    ],
)
def test_what_a_server_can_use_in_one_line(server: ServerAbilities, line: str) -> None:
    assert abilities_text(server) == line


def test_a_device_names_its_backend_without_its_index() -> None:
    assert H200.backend == CUDA
    assert ServerDevice(name="Vulkan12", description="x").backend == "Vulkan"
    with pytest.raises(ValueError, match="total_bytes"):
        ServerDevice(name="CUDA0", description="x", total_bytes=-1)


backends = st.lists(st.sampled_from([CUDA, "Vulkan", "Metal"]), unique=True).map(tuple)
devices = st.lists(
    st.builds(
        ServerDevice,
        name=st.sampled_from(["CUDA0", "CUDA1", "Vulkan0"]),
        description=st.just("card"),
    ),
    max_size=3,
).map(tuple)
servers = st.builds(
    ServerAbilities,
    server=st.just("llama-server"),
    program=st.just("/b"),
    version=st.just("1"),
    backends=backends,
    devices=devices,
    known=st.booleans(),
)
gpus = st.builds(
    Gpu,
    uuid=st.sampled_from(["GPU-a", "GPU-b", "SIM-GPU-c"]),
    model=st.just("m"),
    total_bytes=st.integers(1, 1 << 40),
    simulated=st.booleans(),
)


@given(server=servers, cards=st.lists(gpus, max_size=3).map(tuple), on_cpu=st.booleans())
def test_a_real_card_never_goes_to_a_server_that_cannot_use_it(
    server: ServerAbilities, cards: tuple[Gpu, ...], on_cpu: bool
) -> None:
    given_cards = card_refusal(server, cards, on_cpu=on_cpu) is None
    uses_cuda = server.known and CUDA in server.backends and bool(server.devices_of(CUDA))
    if given_cards and not on_cpu:
        assert uses_cuda or all(c.simulated for c in cards)
    if on_cpu or all(c.simulated for c in cards):
        assert given_cards


REAL_2 = Gpu(uuid="GPU-6a2b3c4d-0001", model="NVIDIA H200", total_bytes=141 * GIB)
CUDA_BLIND_SILENT = ServerAbilities(
    server="llama-server",
    program="/b/cuda-90/llama-server",
    version="0.5.0",
    backends=(CUDA,),
)


def test_a_cuda_server_that_sees_no_card_and_said_nothing_names_every_card() -> None:
    refusal = card_refusal(CUDA_BLIND_SILENT, (REAL, REAL_2), on_cpu=False)
    assert refusal is not None
    assert refusal.sentence == (
        "the model server llama-server 0.5.0 (/b/cuda-90/llama-server) has CUDA but sees no "
        "CUDA device here, so it cannot use GPU-6a2b3c4d-0000 (NVIDIA H200), "
        "GPU-6a2b3c4d-0001 (NVIDIA H200); check the NVIDIA driver (nvidia-smi), or run it "
        "on the CPU with --cpu"
    )


def test_the_lines_of_servers_with_several_devices_backends_or_none_seen() -> None:
    two = ServerAbilities(
        server="llama-server",
        program="/b",
        version="1",
        backends=(CUDA, "Vulkan"),
        devices=(H200, ServerDevice(name="CUDA1", description="NVIDIA H200", total_bytes=GIB)),
    )
    assert abilities_text(two) == (
        "llama-server 1: CUDA (CUDA0 NVIDIA H200, 140.4 GiB, CUDA1 NVIDIA H200, 1.0 GiB); "
        "Vulkan (no Vulkan device seen)"
    )
    assert abilities_text(CUDA_BLIND_SILENT) == "llama-server 0.5.0: CUDA (no CUDA device seen)"


def on(name: str, *cards: Gpu) -> Machine:
    return Machine(name=name, gpus=cards)


def test_every_machine_whose_server_cannot_use_its_real_cards_is_left_out() -> None:
    simulated_only = on("m0", SIMULATED)
    served = on("m1", REAL)
    blind = on("m2", REAL_2)
    silent = on("m3", Gpu(uuid="GPU-x", model="NVIDIA L4", total_bytes=24 * GIB))
    servers = {"m1": CUDA_SEES_CARD, "m2": CUDA_BLIND}
    assert server_exclusions((silent, blind, served, simulated_only), servers, cuda_image=True) == (
        (
            "m2",
            f"{SERVER_CANNOT}: llama-server 0.5.0: CUDA (no CUDA device seen: "
            "no CUDA-capable device is detected)",
        ),
        ("m3", f"{SERVER_CANNOT}: its agent has not said what its model server can use"),
    )
    assert server_exclusions((simulated_only, served), servers, cuda_image=False) == (
        (
            "m1",
            f"{SERVER_CANNOT}: no CUDA model-server image is configured "
            "(the controller's --cuda-server-image)",
        ),
    )
