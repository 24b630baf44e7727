"""The CUDA build, proven on a machine without a card: configured, and what it links.

Configure runs for real on the vendored llama.cpp and PyPI's CUDA 13 toolkit (fetched by
./scripts/test). Each cached CUDA build is checked for what it links and says; the test id says
which this machine proved: ``cuda-90`` or ``no-cuda-build-in-the-cache``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodeau.adapters.cuda_toolkit import CUDA_VERSION, RUNTIME_LIBRARIES
from nodeau.adapters.llama_build import LlamaServerBuilder, cmake_flags
from nodeau.adapters.llama_server import cache_home, installed_builds, server_cache
from nodeau.adapters.server_abilities import ask_binary, linked_libraries
from nodeau.domain.model_server import CUDA, BuildAsk
from nodeau.ports.server_install import BuiltServer

CUDA_90 = BuildAsk(backend="cuda", cuda_archs=("90",))


def nothing(step: str, done: float, total: float | None) -> None:
    """A progress callback that shows nothing."""


def builder() -> LlamaServerBuilder:
    env = os.environ
    return LlamaServerBuilder(server_cache(env), cuda_cache=cache_home(env) / "cuda", environ=env)


def test_the_cuda_configure_step_finds_the_toolkit_and_its_architecture(tmp_path: Path) -> None:
    source, toolkit = builder().fetch(CUDA_90, nothing)
    assert toolkit is not None and toolkit.version == CUDA_VERSION
    flags = cmake_flags(CUDA_90, toolkit=toolkit, driver=None, ccache=None)
    done = subprocess.run(
        ["cmake", "-S", str(source), "-B", str(tmp_path / "build"), *flags],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout
    assert f'Found CUDAToolkit: {toolkit.root}/include (found version "{CUDA_VERSION}")' in said
    assert "The CUDA compiler identification is NVIDIA " + CUDA_VERSION in said
    assert "Using CMAKE_CUDA_ARCHITECTURES=90 " in said
    assert "Including CUDA backend" in said
    cuda_flags = tmp_path / "build/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/flags.make"
    text = cuda_flags.read_text()
    assert "arch=compute_90" in text and "GGML_CUDA_NO_VMM" in text


# A CUDA build's compile (over an hour on 2 cores) is no part of a test run: it is made by
# scripts/build-cuda-server. Without one in the cache, only that nothing claims one is checked.
def cuda_builds() -> list[object]:
    found = [b for b in builder().builds() if b.backend == "cuda"]
    if not found:
        return [pytest.param(None, id="no-cuda-build-in-the-cache")]
    return [pytest.param(b, id=b.flavour) for b in found]


@pytest.mark.parametrize("built", cuda_builds())
def test_a_cuda_build_links_the_cuda_libraries_and_says_cuda(built: BuiltServer | None) -> None:
    if built is None:
        chosen = installed_builds(os.environ, prefer_cuda=True)
        assert not [b for b in chosen if b.parents[1].name.startswith("cuda")]
        return
    binary = Path(built.binary)
    libraries = linked_libraries(binary)
    assert libraries.get("libggml-cuda.so.0") == str(binary.parent / "libggml-cuda.so.0")
    for name in RUNTIME_LIBRARIES:
        assert name in libraries and Path(libraries[name]).is_file(), (name, libraries)
    assert "not found" not in " ".join(libraries.values())
    said = ask_binary(binary, {**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert said.backends == (CUDA,)
    assert built.backends == (CUDA,) and built.toolkit.startswith(f"CUDA {CUDA_VERSION}")
