"""This machine's hardware and model server, built from settings (the CLI and the agent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from returns.result import Failure, Success

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


def model_server(env: Mapping[str, str]) -> RuntimeChoice:
    """The model server this machine runs (``choose_runtime``'s order); none: a SettingsError."""
    from nodeau.adapters.llama_server import choose_runtime

    match choose_runtime(env):
        case Success(chosen):
            found: RuntimeChoice = chosen
            return found
        case Failure(reason):
            raise SettingsError(str(reason))
    raise AssertionError("choose_runtime answers a Result")
