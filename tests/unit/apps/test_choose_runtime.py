"""Which model server runs: choose_runtime's order, with fake programs in temporary folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from returns.result import Failure, Success

from nodeau.adapters import llama_server
from nodeau.adapters.llama_server import NO_SERVER, ModelServer, RuntimeChoice, choose_runtime
from nodeau.apps.cli.errors import SettingsError
from nodeau.apps.machine import model_server

PYTHON = Path("/venv/bin/python")


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def chosen(env: dict[str, str], *, installed: bool) -> RuntimeChoice:
    result = choose_runtime(env, has_llama_cpp=lambda: installed, python=PYTHON)
    assert isinstance(result, Success), result
    return result.unwrap()


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """A PATH with llama-server on it, a build cache with two versions, a home."""
    executable(tmp_path / "cache" / "0.3.9" / "build" / "bin" / "llama-server")
    executable(tmp_path / "cache" / "0.3.36" / "build" / "bin" / "llama-server")
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


def test_the_package_is_the_embedded_default_using_the_newest_build_s_library(
    machine: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_server.importlib.util, "find_spec", lambda name: None)
    choice = chosen({**machine, "PATH": str(tmp_path / "empty")}, installed=True)
    assert choice == RuntimeChoice(
        server=ModelServer.LLAMA_CPP_PYTHON,
        program=PYTHON,
        library=tmp_path / "cache" / "0.3.36" / "build" / "bin",
        reason="no llama-server configured or on PATH; the llama_cpp package is installed",
    )
    with_lib = chosen(
        {**machine, "PATH": str(tmp_path / "empty"), "LLAMA_CPP_LIB_PATH": "/opt/lib"},
        installed=True,
    )
    assert with_lib.library == Path("/opt/lib")


def test_a_package_without_any_library_is_said_plainly(tmp_path: Path) -> None:
    env = {"PATH": "", "HOME": str(tmp_path), "NODEAU_LLAMA_CACHE": str(tmp_path / "none")}
    result = choose_runtime(env, has_llama_cpp=lambda: True, python=PYTHON)
    assert isinstance(result, Failure)
    assert result.failure().startswith("the llama_cpp package has no libllama here")
    assert "LLAMA_CPP_LIB_PATH" in result.failure() and "\n" not in result.failure()


def test_without_the_package_the_newest_build_serves_and_says_so(
    machine: dict[str, str], tmp_path: Path
) -> None:
    choice = chosen({**machine, "PATH": str(tmp_path / "empty")}, installed=False)
    assert (choice.server, choice.program) == (
        ModelServer.LLAMA_SERVER,
        tmp_path / "cache" / "0.3.36" / "build" / "bin" / "llama-server",
    )
    assert "no llama_cpp package" in choice.reason
    assert "newest build of scripts/build-llama-server" in choice.reason


def test_with_nothing_the_error_is_one_line_saying_how_to_get_one(tmp_path: Path) -> None:
    env = {"PATH": "", "HOME": str(tmp_path / "nohome")}
    assert choose_runtime(env, has_llama_cpp=lambda: False) == Failure(NO_SERVER)
    assert "\n" not in NO_SERVER and "scripts/build-llama-server" in NO_SERVER


def test_the_plane_turns_no_server_into_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NODEAU_LLAMA_SERVER", "LLAMA_CPP_LIB_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NODEAU_LLAMA_CACHE", str(tmp_path / "none"))
    monkeypatch.setattr(llama_server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SettingsError, match=r"^no model server found: set NODEAU_LLAMA_SERVER"):
        model_server(os.environ)
