"""A model split across cards is served by one llama-server that sees every card, in slot
order, and is told each card's whole slot count; llama-cpp-python's server, which Nodeau
does not give a split, refuses one before any process starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeau.adapters.llama_cpp_python import NO_SPLIT, LlamaCppPythonRuntime
from nodeau.adapters.llama_server import LlamaServerRuntime, server_command
from nodeau.domain.memory import RuntimeConfig
from nodeau.ports.runtime import RuntimeFailure, ServerSpec

SPLIT = (("GPU-b", 5), ("GPU-a", 4))


def spec(tmp_path: Path, **changes: object) -> ServerSpec:
    fields: dict[str, object] = {
        "name": "big", "model_path": tmp_path / "m.gguf",
        "config": RuntimeConfig(context_tokens=4096), "gpu_uuid": "GPU-b",
        "log_path": tmp_path / "log", "split": SPLIT,
    }  # fmt: skip
    return ServerSpec(**(fields | changes))  # type: ignore[arg-type]


def test_the_server_is_told_each_cards_slots_and_sees_the_cards_in_that_order(
    tmp_path: Path,
) -> None:
    split = spec(tmp_path)
    command = server_command(Path("llama-server"), split, 1)
    at = command.index("--split-mode")
    assert command[at : at + 4] == ("--split-mode", "layer", "--tensor-split", "5,4")
    assert command[command.index("--n-gpu-layers") + 1] == "999"
    env = LlamaServerRuntime(Path("llama-server")).environment({"PATH": "/bin"}, split)
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "GPU-b,GPU-a"
    one = spec(tmp_path, split=())
    assert "--tensor-split" not in server_command(Path("llama-server"), one, 1)
    assert one.visible_cards == "GPU-b"
    assert spec(tmp_path, split=(), gpu_uuid=None).visible_cards is None


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"split": (("GPU-b", 9),)}, "two cards or more"),
        ({"gpu_uuid": "GPU-a"}, "two cards or more, from GPU-a"),
        ({"gpu_uuid": None}, "two cards or more"),
        ({"split": (("GPU-b", 9), ("GPU-a", 0))}, "every card of big's split takes a slot"),
    ],
)
def test_a_split_that_is_not_one_is_a_mistake(
    tmp_path: Path, changes: dict[str, object], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        spec(tmp_path, **changes)


def test_llama_cpp_pythons_server_refuses_a_split_before_starting(tmp_path: Path) -> None:
    runtime = LlamaCppPythonRuntime(Path("python3"))
    with pytest.raises(RuntimeFailure, match="not given a model split"):
        runtime.check(spec(tmp_path))
    assert NO_SPLIT.endswith("set NODEAU_LLAMA_SERVER to a llama-server")
    runtime.check(spec(tmp_path, split=()))
