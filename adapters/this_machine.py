"""This machine's cards and model server, chosen from the environment: simulated cards or
NVML, the model server ``run`` starts, and what that binary says it can use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from attrs import evolve
from returns.result import Failure, Success

from nodeau.domain.hardware import MachineReading
from nodeau.domain.model_server import ServerAbilities
from nodeau.ports.errors import SettingsError
from nodeau.ports.hardware import GpuInventory

if TYPE_CHECKING:
    from nodeau.adapters.llama_server import RuntimeChoice


def inventory_for(machine: str, simulated: str | None) -> GpuInventory:
    """Simulated cards when ``NODEAU_SIMULATED_GPUS`` says so, else NVML."""
    if simulated is not None:
        from nodeau.adapters.simulated_inventory import SimulatedGpuInventory

        try:
            return SimulatedGpuInventory(machine, simulated)
        except ValueError as exc:
            raise SettingsError(f"NODEAU_SIMULATED_GPUS: {exc}") from exc
    from nodeau.adapters.nvml_inventory import NvmlGpuInventory

    return NvmlGpuInventory(machine)


def model_server(env: Mapping[str, str], *, prefer_cuda: bool = False) -> RuntimeChoice:
    """The model server this machine runs (``choose_runtime``'s order; ``prefer_cuda``: this
    machine has real NVIDIA cards); none: a SettingsError naming ``nodeau server install``."""
    from nodeau.adapters.llama_server import choose_runtime

    match choose_runtime(env, prefer_cuda=prefer_cuda):
        case Success(chosen):
            found: RuntimeChoice = chosen
            return found
        case Failure(reason):
            raise SettingsError(str(reason))
    raise AssertionError("choose_runtime answers a Result")


def server_abilities(
    choice: RuntimeChoice, reading: MachineReading, env: Mapping[str, str]
) -> ServerAbilities:
    """What the chosen model server can use, asked of its binary as it would run here: shown
    this machine's real cards (``CUDA_VISIBLE_DEVICES``), none where they are simulated.
    Kept per binary in ``<cache>/server-abilities.json``. llama-cpp-python's server is asked
    through the llama-server built beside its library; one without is not asked."""
    from nodeau.adapters.llama_server import ModelServer, cache_home
    from nodeau.adapters.server_abilities import KeptAbilities

    real = [g.uuid for g in reading.real_cards]
    shown = {**env, "CUDA_VISIBLE_DEVICES": ",".join(real)}
    kept = KeptAbilities(cache_home(env) / "server-abilities.json")
    if choice.server is ModelServer.LLAMA_SERVER:
        return kept.abilities(choice.program, shown)
    beside = None if choice.library is None else choice.library / "llama-server"
    if beside is not None and beside.is_file():
        said = kept.abilities(beside, shown)
        return evolve(said, server=ModelServer.LLAMA_CPP_PYTHON.value, program=str(choice.program))
    return ServerAbilities(
        server=ModelServer.LLAMA_CPP_PYTHON.value,
        program=str(choice.program),
        version="(its package's)",
        known=False,
        note="llama-cpp-python's own libllama: Nodeau cannot ask it which devices it uses",
    )
