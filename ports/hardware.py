"""Ports of the hardware: what cards this machine has, what each process holds on them, and
which Pod a process belongs to."""

from __future__ import annotations

from typing import Protocol

from nodeau.domain.hardware import CardProcess, MachineReading
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


class CardProcesses(Protocol):
    """Reads which processes hold memory on this machine's cards (NVML, per process)."""

    def processes(self) -> tuple[CardProcess, ...]:
        """Every compute process on every card now, with the bytes it holds there, its
        card named by UUID. None at all where no card's driver can be read; a process whose
        figure the driver does not report is left out. ``HardwareError`` when a card's list
        cannot be read. Simulated cards have no processes of their own: nothing implements
        this for them."""
        ...


class ProcessPods(Protocol):
    """Tells which Kubernetes Pod a process of this machine runs in."""

    def pod_of(self, pid: int) -> str | None:
        """The UID of the Pod whose container runs process ``pid`` (as its kubelet named
        the Pod's cgroup), or None: not in a Pod, gone, or not readable."""
        ...
