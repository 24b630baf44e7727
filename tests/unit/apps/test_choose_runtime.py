"""Which model server runs: choose_runtime's order, with fake programs in temporary folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from returns.result import Failure, Success

from nodeau.adapters import llama_server
from nodeau.adapters.llama_build import RECORD
from nodeau.adapters.llama_server import NO_SERVER, ModelServer, RuntimeChoice, choose_runtime
from nodeau.adapters.this_machine import model_server
from nodeau.apps.cli.errors import SettingsError

PYTHON = Path("/venv/bin/python")


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def finished_build(path: Path) -> Path:
    """A llama-server ``nodeau server install`` finished: its folder has the build record."""
    executable(path)
    (path.parents[1] / RECORD).write_text("{}")
    return path


def chosen(env: dict[str, str], *, installed: bool) -> RuntimeChoice:
    result = choose_runtime(env, has_llama_cpp=lambda: installed, python=PYTHON)
    assert isinstance(result, Success), result
    return result.unwrap()


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """A PATH with llama-server on it, a build cache with two versions, a home."""
    finished_build(tmp_path / "cache" / "0.3.9" / "cpu" / "bin" / "llama-server")
    finished_build(tmp_path / "cache" / "0.3.36" / "cpu" / "bin" / "llama-server")
    executable(tmp_path / "bin" / "llama-server")
    (tmp_path / "empty").mkdir()
    return {
        "PATH": str(tmp_path / "bin"),
        "NODEAU_LLAMA_CACHE": str(tmp_path / "cache"),
        "HOME": str(tmp_path / "home"),
    }


def test_the_setting_wins_even_over_an_installed_package(
    machine: dict[str, str], tmp_path: Path
) -> None:
    choice = chosen({**machine, "NODEAU_LLAMA_SERVER": "/nowhere/llama-server"}, installed=True)
    assert (choice.server, choice.program) == (
        ModelServer.LLAMA_SERVER,
        Path("/nowhere/llama-server"),
    )
    assert choice.reason == "NODEAU_LLAMA_SERVER is set"


def test_llama_server_on_path_comes_before_the_package(
    machine: dict[str, str], tmp_path: Path
) -> None:
    choice = chosen(machine, installed=True)
    assert (choice.server, choice.program) == (
        ModelServer.LLAMA_SERVER,
        tmp_path / "bin" / "llama-server",
    )
    assert "on PATH" in choice.reason


def test_a_finished_install_comes_before_the_package(
    machine: dict[str, str], tmp_path: Path
) -> None:
    choice = chosen({**machine, "PATH": str(tmp_path / "empty")}, installed=True)
    assert (choice.server, choice.program) == (
        ModelServer.LLAMA_SERVER,
        tmp_path / "cache" / "0.3.36" / "cpu" / "bin" / "llama-server",
    )
    assert choice.reason == "the newest `nodeau server install` build (cpu)"


def test_a_cuda_build_is_chosen_first_only_where_the_machine_has_cards(
    machine: dict[str, str], tmp_path: Path
) -> None:
    cuda = finished_build(tmp_path / "cache" / "0.3.36" / "cuda-90" / "bin" / "llama-server")
    bare = {**machine, "PATH": str(tmp_path / "empty")}
    with_cards = choose_runtime(bare, prefer_cuda=True, has_llama_cpp=lambda: False)
    without = choose_runtime(bare, prefer_cuda=False, has_llama_cpp=lambda: False)
    assert with_cards.unwrap().program == cuda
    assert (
        without.unwrap().program == tmp_path / "cache" / "0.3.36" / "cpu" / "bin" / "llama-server"
    )
    assert "(cuda-90)" in with_cards.unwrap().reason


def test_the_package_is_the_embedded_default_with_its_library_from_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_server.importlib.util, "find_spec", lambda name: None)
    env = {"PATH": "", "HOME": str(tmp_path), "LLAMA_CPP_LIB_PATH": "/opt/lib"}
    choice = chosen(env, installed=True)
    assert choice == RuntimeChoice(
        server=ModelServer.LLAMA_CPP_PYTHON,
        program=PYTHON,
        library=Path("/opt/lib"),
        reason="no llama-server configured, on PATH or installed; the llama_cpp package is",
    )


def test_a_package_without_any_library_is_said_plainly(tmp_path: Path) -> None:
    env = {"PATH": "", "HOME": str(tmp_path), "NODEAU_LLAMA_CACHE": str(tmp_path / "none")}
    result = choose_runtime(env, has_llama_cpp=lambda: True, python=PYTHON)
    assert isinstance(result, Failure)
    assert result.failure().startswith("the llama_cpp package has no libllama here")
    assert "LLAMA_CPP_LIB_PATH" in result.failure() and "\n" not in result.failure()


def test_an_unfinished_build_is_never_chosen(tmp_path: Path) -> None:
    executable(tmp_path / "cache" / "0.3.36" / "cpu" / "bin" / "llama-server")  # no record
    env = {"PATH": "", "HOME": str(tmp_path), "NODEAU_LLAMA_CACHE": str(tmp_path / "cache")}
    assert choose_runtime(env, has_llama_cpp=lambda: False) == Failure(NO_SERVER)


def test_with_nothing_the_error_is_one_line_saying_how_to_get_one(tmp_path: Path) -> None:
    env = {"PATH": "", "HOME": str(tmp_path / "nohome")}
    assert choose_runtime(env, has_llama_cpp=lambda: False) == Failure(NO_SERVER)
    assert "\n" not in NO_SERVER and "`nodeau server install`" in NO_SERVER


def test_the_plane_turns_no_server_into_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NODEAU_LLAMA_SERVER", "LLAMA_CPP_LIB_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NODEAU_LLAMA_CACHE", str(tmp_path / "none"))
    monkeypatch.setattr(llama_server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SettingsError, match=r"^no model server found: run `nodeau server install`"):
        model_server(os.environ)
