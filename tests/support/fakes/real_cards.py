"""Simulated cards read as real ones: what a machine with NVIDIA cards reports through NVML."""

from __future__ import annotations

from attrs import evolve

from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.domain.hardware import MachineReading


class RealCards(SimulatedGpuInventory):
    """The simulated inventory's cards, each marked real, and NVML's note for them."""

    def read(self) -> MachineReading:
        reading = super().read()
        cards = tuple(evolve(r, gpu=evolve(r.gpu, simulated=False)) for r in reading.gpus)
        note = f"{len(cards)} NVIDIA GPU{'' if len(cards) == 1 else 's'} (NVML)"
        return evolve(reading, gpus=cards, simulated=False, note=note)
