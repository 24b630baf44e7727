"""The CMake flags of each build: the ones that avoid this VM's crash, and CUDA's."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeau.adapters.cuda_toolkit import Toolkit
from nodeau.adapters.llama_build import cmake_flags
from nodeau.domain.model_server import BuildAsk

TOOLKIT = Toolkit(root=Path("/tk"), version="13.0.88", source="PyPI's NVIDIA wheels")
CPU = BuildAsk(backend="cpu")
CUDA = BuildAsk(backend="cuda", cuda_archs=("80", "90"))


def test_every_build_is_portable_and_fetches_nothing() -> None:
    for flags in (
        cmake_flags(CPU, toolkit=None, driver=None, ccache=None),
        cmake_flags(CUDA, toolkit=TOOLKIT, driver=None, ccache="ccache"),
    ):
        # no -march=native: AMX code this VM cannot run; no web UI download; no TLS or curl
        for flag in (
            "-DGGML_NATIVE=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF",
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_CURL=OFF",
            "-DCMAKE_BUILD_TYPE=Release",
        ):
            assert flag in flags


def test_a_cpu_build_names_no_cuda() -> None:
    flags = cmake_flags(CPU, toolkit=None, driver=None, ccache=None)
    assert not [f for f in flags if "CUDA" in f]
    assert "-DCMAKE_C_COMPILER_LAUNCHER=ccache" in cmake_flags(
        CPU, toolkit=None, driver=None, ccache="ccache"
    )


def test_a_cuda_build_names_its_toolkit_and_architectures() -> None:
    flags = cmake_flags(CUDA, toolkit=TOOLKIT, driver=Path("/usr/lib/libcuda.so.1"), ccache=None)
    assert {
        "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=80;90",
        "-DCUDAToolkit_ROOT=/tk",
        "-DCMAKE_CUDA_COMPILER=/tk/bin/nvcc",
        "-DCUDA_cuda_driver_LIBRARY=/usr/lib/libcuda.so.1",
        "-DCMAKE_BUILD_RPATH=/tk/lib64;/tk/lib",  # where the binary finds libcudart
    } <= set(flags)
    assert "-DGGML_CUDA_NO_VMM=ON" not in flags


def test_without_a_driver_library_a_cuda_build_uses_the_legacy_pool() -> None:
    flags = cmake_flags(CUDA, toolkit=TOOLKIT, driver=None, ccache=None)
    assert "-DGGML_CUDA_NO_VMM=ON" in flags
    assert not [f for f in flags if f.startswith("-DCUDA_cuda_driver_LIBRARY")]


def test_a_cuda_build_needs_a_toolkit() -> None:
    with pytest.raises(ValueError, match="toolkit"):
        cmake_flags(CUDA, toolkit=None, driver=None, ccache=None)
