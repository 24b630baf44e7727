"""The one-machine plane's adapters, built from settings when a serving command needs them."""

from __future__ import annotations

import os

from attrs import frozen

from nodeau.apps.cli import services
from nodeau.apps.cli.bootstrap import utc_now
from nodeau.apps.cli.errors import SettingsError
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.runtime import ModelRuntime
from nodeau.ports.state import StateStore


@frozen(kw_only=True)
class Plane:
    models: services.ModelServices
    inventory: GpuInventory
    state: StateStore

    def runtime(self) -> ModelRuntime:
        from nodeau.adapters.llama_server import LlamaServerRuntime, find_llama_server

        binary = find_llama_server(os.environ)
        if binary is None:
            raise SettingsError(
                "no llama-server found: set NODEAU_LLAMA_SERVER, put llama-server on PATH, "
                "or build one with scripts/build-llama-server"
            )
        simulated = self.models.settings.simulated_gpus is not None
        return LlamaServerRuntime(
            binary, inventory_memory=None if simulated else self.inventory.process_memory
        )


def inventory_for(machine: str, simulated: str | None) -> GpuInventory:
    if simulated is not None:
        from nodeau.adapters.simulated_inventory import SimulatedGpuInventory

        try:
            return SimulatedGpuInventory(machine, simulated)
        except ValueError as exc:
            raise SettingsError(f"NODEAU_SIMULATED_GPUS: {exc}") from exc
    from nodeau.adapters.nvml_inventory import NvmlGpuInventory

    return NvmlGpuInventory(machine)


def build() -> Plane:
    from nodeau.adapters.sqlite_state import SqliteStateStore

    models = services.build()
    s = models.settings
    return Plane(
        models=models,
        inventory=inventory_for(s.machine, s.simulated_gpus),
        state=SqliteStateStore(s.state_path, utc_now),
    )
