"""Installing the model server: fetching pinned files, building, reusing, failing cleanly.

The builder, CMake and the index (on 127.0.0.1, with faults) are real; a stand-in CMake project
replaces llama.cpp's sources so a build takes seconds. The real CPU build is asked at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from attrs import evolve

from nodeau.adapters.llama_build import LLAMA_CPP_PYTHON, RECORD, LlamaServerBuilder
from nodeau.adapters.pypi_files import PinnedFile, fetch_pinned
from nodeau.adapters.server_abilities import ask_binary, linked_libraries
from nodeau.domain.model_server import BuildAsk, abilities_text
from nodeau.ports.server_install import InstallError
from tests.support.real.llama import llama_server_binary
from tests.support.real.publisher import LocalPublisher, local_publisher

STAND_IN = """\
#!/bin/sh
if [ "$1" = --version ]; then echo 'version: 0.0.1 (build 1, commit feed123)' >&2; exit 0; fi
echo 'Available devices:'
echo '  (none)'
"""
CMAKE_PROJECT = """\
cmake_minimum_required(VERSION 3.18)
project(stand_in NONE)
{fail}
foreach(target llama-server llama-fit-params)
  add_custom_target(${{target}} ALL
    COMMAND ${{CMAKE_COMMAND}} -E make_directory ${{CMAKE_BINARY_DIR}}/bin
    COMMAND ${{CMAKE_COMMAND}} -E copy ${{CMAKE_SOURCE_DIR}}/stand-in.sh
            ${{CMAKE_BINARY_DIR}}/bin/${{target}})
endforeach()
"""


def nothing(step: str, done: float, total: float | None) -> None:
    """A progress callback that shows nothing."""


def source_tree(cache: Path, *, fail: str = "") -> Path:
    """The cache's unpacked sources replaced by the stand-in project."""
    home = cache / LLAMA_CPP_PYTHON
    tree = home / "src" / "vendor" / "llama.cpp"
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "CMakeLists.txt").write_text(CMAKE_PROJECT.format(fail=fail))
    script = tree / "stand-in.sh"
    script.write_text(STAND_IN)
    script.chmod(0o755)
    (home / "src.unpacked").touch()
    return tree


def builder(cache: Path) -> LlamaServerBuilder:
    env = {"PATH": os.environ["PATH"], "HOME": str(cache)}
    return LlamaServerBuilder(cache, cuda_cache=cache / "cuda", environ=env, jobs=1)


def test_a_build_is_finished_only_with_its_record_and_then_reused(tmp_path: Path) -> None:
    source_tree(tmp_path)
    steps: list[str] = []
    made = builder(tmp_path).install(
        BuildAsk(backend="cpu"), lambda step, done, total: steps.append(step)
    )
    assert (made.flavour, made.version, made.backends, made.reused) == (
        "cpu",
        "0.0.1 (build 1, commit feed123)",
        (),
        False,
    )
    assert Path(made.binary) == tmp_path / LLAMA_CPP_PYTHON / "cpu" / "bin" / "llama-server"
    assert "configuring (cmake)" in steps and any(s.startswith("compiling") for s in steps)
    record = json.loads((tmp_path / LLAMA_CPP_PYTHON / "cpu" / RECORD).read_text())
    assert record["binary"] == made.binary and record["llama_cpp_python"] == LLAMA_CPP_PYTHON
    again = builder(tmp_path).install(BuildAsk(backend="cpu"), nothing)
    assert again.reused and again.built_at == made.built_at
    assert builder(tmp_path).builds() == (evolve(again, reused=False),)


def test_a_failed_build_leaves_no_record_and_says_where_its_log_is(tmp_path: Path) -> None:
    source_tree(tmp_path, fail='message(FATAL_ERROR "no compiler for this")')
    with pytest.raises(InstallError, match=r"cmake -S failed \(.*no compiler for this.*\); log: "):
        builder(tmp_path).install(BuildAsk(backend="cpu"), nothing)
    assert not (tmp_path / LLAMA_CPP_PYTHON / "cpu" / RECORD).exists()
    assert builder(tmp_path).builds() == ()
    source_tree(tmp_path)  # fixed: the next install goes on and finishes
    assert not builder(tmp_path).install(BuildAsk(backend="cpu"), nothing).reused


def test_a_build_whose_binary_is_gone_is_made_again(tmp_path: Path) -> None:
    source_tree(tmp_path)
    made = builder(tmp_path).install(BuildAsk(backend="cpu"), nothing)
    Path(made.binary).unlink()
    again = builder(tmp_path).install(BuildAsk(backend="cpu"), nothing)
    assert not again.reused and Path(again.binary).is_file()


def index_serving(publisher: LocalPublisher, project: str, name: str, **faults: object) -> None:
    listing = {"files": [{"filename": name, "url": f"/files/{name}"}]}
    publisher.serve(f"/simple/{project}/", json.dumps(listing).encode())
    publisher.serve(f"/files/{name}", BODY, **faults)


BODY = b"the pinned bytes " * 4096
PINNED = PinnedFile(
    project="demo", filename="demo-1.0.tar.gz", sha256=hashlib.sha256(BODY).hexdigest()
)


def test_a_pinned_file_is_fetched_from_the_index_the_environment_names(tmp_path: Path) -> None:
    with local_publisher() as publisher:
        index_serving(publisher, "demo", PINNED.filename)
        env = {"PIP_INDEX_URL": publisher.url("/simple")}
        seen: list[tuple[float, float | None]] = []
        got = fetch_pinned(
            PINNED, tmp_path / "demo.tgz", environ=env, progress=lambda s, d, t: seen.append((d, t))
        )
        assert got.read_bytes() == BODY
        assert seen[-1] == (len(BODY), len(BODY))
        fetch_pinned(PINNED, got, environ=env, progress=nothing)  # kept: not asked again
        assert [r.path for r in publisher.requests].count(f"/files/{PINNED.filename}") == 1


@pytest.mark.parametrize(
    ("faults", "words"),
    [
        ({"wrong_bytes": True}, "not the pinned"),
        ({"cut_after": 1000}, "fetching demo-1.0.tar.gz from"),
        ({"status": 503}, "fetching demo-1.0.tar.gz from"),
    ],
    ids=["other-bytes", "cut-short", "index-down"],
)
def test_a_bad_download_is_refused_and_leaves_nothing(
    tmp_path: Path, faults: dict[str, object], words: str
) -> None:
    with local_publisher() as publisher:
        index_serving(publisher, "demo", PINNED.filename, **faults)
        env = {"PIP_INDEX_URL": publisher.url("/simple/")}
        with pytest.raises(InstallError, match=words):
            fetch_pinned(PINNED, tmp_path / "demo.tgz", environ=env, progress=nothing)
    assert [p.name for p in tmp_path.iterdir()] in ([], ["demo.tgz.part"])
    assert not (tmp_path / "demo.tgz").exists()


def test_an_index_without_the_file_says_so(tmp_path: Path) -> None:
    with local_publisher() as publisher:
        index_serving(publisher, "demo", "demo-0.9.tar.gz")
        env = {"PIP_INDEX_URL": publisher.url("/simple/")}
        with pytest.raises(InstallError, match=r"/simple/demo/ has no file demo-1.0.tar.gz"):
            fetch_pinned(PINNED, tmp_path / "demo.tgz", environ=env, progress=nothing)


def test_the_real_cpu_build_says_it_is_cpu_only() -> None:
    binary = llama_server_binary()
    said = ask_binary(binary, {**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert said.backends == () and said.devices == ()
    assert abilities_text(said).endswith(": CPU only")
    libraries = linked_libraries(binary)
    assert any(name.startswith("libggml-cpu") for name in libraries)
    assert not any("cuda" in name or "cublas" in name for name in libraries)
    assert shutil.which("ldd") is not None
