"""Asking a llama-server what it can use: its answers parsed, kept per binary and cards.

The answers are the vendored llama.cpp's; a stand-in shell script prints a CUDA build's answer
(no card here). The real CPU build is asked in tests/integration/test_model_server_install.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.server_abilities import (
    KeptAbilities,
    ask_binary,
    parse_backends,
    parse_devices,
)
from nodeau.domain.model_server import CUDA, ServerDevice
from nodeau.ports.runtime import RuntimeFailure
from tests.support.fakes.server_answers import CPU_ANSWER, CUDA_ANSWER, CUDA_NO_CARD, stand_in

MIB = 1 << 20
DL_ANSWER = """\
load_backend: loaded CPU backend from /opt/llama/libggml-cpu-haswell.so
load_backend: loaded Vulkan backend from /opt/llama/libggml-vulkan.so
Available devices:
  Vulkan0: NVIDIA GeForce RTX 4090 (24564 MiB, 23000 MiB free)
"""


def test_the_devices_a_cuda_build_lists() -> None:
    assert parse_devices(CUDA_ANSWER) == (
        ServerDevice(
            name="CUDA0",
            description="NVIDIA H200",
            total_bytes=143771 * MIB,
            free_bytes=143001 * MIB,
        ),
        ServerDevice(
            name="CUDA1", description="NVIDIA H200", total_bytes=143771 * MIB, free_bytes=12 * MIB
        ),
    )
    assert parse_devices(CPU_ANSWER) == ()


@pytest.mark.parametrize(
    ("answer", "libraries", "backends"),
    [
        (CUDA_ANSWER, (), (CUDA,)),
        (CUDA_NO_CARD, (), (CUDA,)),  # built with CUDA, sees no card: still a CUDA build
        (CPU_ANSWER, ("libggml-base.so.0", "libggml-cpu.so.0", "libllama.so.0"), ()),
        (CPU_ANSWER, ("libggml-cuda.so.0", "libcudart.so.13"), (CUDA,)),
        (DL_ANSWER, (), ("Vulkan",)),
    ],
)
def test_the_backends_besides_the_cpu(
    answer: str, libraries: tuple[str, ...], backends: tuple[str, ...]
) -> None:
    assert parse_backends(answer, libraries) == backends


@given(st.text())
def test_any_answer_parses_without_raising(text: str) -> None:
    for device in parse_devices(text):
        assert device.total_bytes >= 0 and device.free_bytes >= 0
    assert "CPU" not in parse_backends(text, ())


def test_a_cuda_build_on_a_card_says_so(tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "llama-server", CUDA_ANSWER, counter=tmp_path / "calls")
    said = ask_binary(binary, {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"})
    assert (said.version, said.backends, len(said.devices)) == (
        "9.9.9 (build 7, commit abc1234)",
        (CUDA,),
        2,
    )
    assert (tmp_path / "calls").read_text().splitlines() == [
        "--version GPU-a,GPU-b",
        "--list-devices GPU-a,GPU-b",
    ]


def test_a_cuda_build_without_a_card_says_why(tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "llama-server", CUDA_NO_CARD, counter=tmp_path / "calls")
    said = ask_binary(binary, {"PATH": "/usr/bin:/bin"})
    assert said.backends == (CUDA,) and said.devices == ()
    assert said.note == "no CUDA-capable device is detected"


def test_the_answer_is_kept_per_binary_and_per_cards_shown(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    binary = stand_in(tmp_path / "llama-server", CUDA_ANSWER, counter=calls)
    kept = KeptAbilities(tmp_path / "cache" / "server-abilities.json")
    env = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "GPU-a"}
    first = kept.abilities(binary, env)
    assert kept.abilities(binary, env) == first
    assert len(calls.read_text().splitlines()) == 2  # asked once
    kept.abilities(binary, {**env, "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"})
    assert len(calls.read_text().splitlines()) == 4  # other cards shown: asked again
    stand_in(binary, CPU_ANSWER, counter=calls)  # the binary changed (rebuilt)
    assert kept.abilities(binary, env).backends == ()
    assert len(calls.read_text().splitlines()) == 6


def test_a_damaged_keeping_file_is_asked_again(tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "llama-server", CUDA_ANSWER, counter=tmp_path / "calls")
    keeping = tmp_path / "server-abilities.json"
    keeping.write_text("{not json")
    assert KeptAbilities(keeping).abilities(binary, {}).backends == (CUDA,)


def test_a_binary_that_fails_or_is_missing_is_one_line(tmp_path: Path) -> None:
    failing = stand_in(tmp_path / "bad", "boom: no such flag\n", counter=tmp_path / "c", code=3)
    with pytest.raises(RuntimeFailure, match=r"--list-devices exited with 3: boom: no such flag"):
        ask_binary(failing, {})
    with pytest.raises(RuntimeFailure, match="no model server there"):
        KeptAbilities(tmp_path / "k.json").abilities(tmp_path / "missing", {})
