"""Port of the hardware: what cards this machine has, and what a process holds on one."""

from __future__ import annotations

from typing import Protocol

from nodeau.domain.hardware import MachineReading
from nodeau.ports.errors import NodeauError


class HardwareError(NodeauError):
    """The hardware could not be read; ``str()`` is one line for a person."""


class GpuInventory(Protocol):
    """Reads this machine's GPUs, by UUID, never by index."""

    def read(self) -> MachineReading:
        """The machine's cards now. A machine with no NVIDIA driver or no card is a
        reading with no GPUs and a plain note ("no NVIDIA GPU found: ..."), not an
        error. Simulated hardware says so in ``simulated`` and in the note."""
        ...

    def process_memory(self, pid: int) -> int | None:
        """Bytes the process holds on any card (NVML), or None where that cannot be read."""
        ...
