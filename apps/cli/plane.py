"""The one-machine plane's adapters, built from settings when a serving command needs them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps import machine
from nodeau.apps.cli import services
from nodeau.apps.cli.bootstrap import utc_now
from nodeau.apps.machine import inventory_for
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.runtime import ModelRuntime
from nodeau.ports.state import StateStore

if TYPE_CHECKING:
    from nodeau.adapters.llama_server import RuntimeChoice


@frozen(kw_only=True)
class Plane:
    models: services.ModelServices
    inventory: GpuInventory
    state: StateStore

    def runtime(self) -> ModelRuntime:
        from nodeau.adapters.llama_cpp_python import LlamaCppPythonRuntime
        from nodeau.adapters.llama_server import LlamaServerRuntime, ModelServer

        choice = model_server()
        simulated = self.models.settings.simulated_gpus is not None
        memory = None if simulated else self.inventory.process_memory
        if choice.server is ModelServer.LLAMA_CPP_PYTHON:
            return LlamaCppPythonRuntime(
                choice.program, library=choice.library, inventory_memory=memory
            )
        return LlamaServerRuntime(choice.program, inventory_memory=memory)


def model_server() -> RuntimeChoice:
    """The model server this machine runs; none: a SettingsError."""
    return machine.model_server(os.environ)


def build() -> Plane:
    from nodeau.adapters.sqlite_state import SqliteStateStore

    models = services.build()
    s = models.settings
    return Plane(
        models=models,
        inventory=inventory_for(s.machine, s.simulated_gpus),
        state=SqliteStateStore(s.state_path, utc_now),
    )
