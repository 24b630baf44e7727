"""Simulated cards, from a spec such as "1 x 24 GiB", for machines without a GPU (CI, laptops).

Why it is so: docs/adr/decisions/adapters.md (simulated_inventory.py).
"""

from __future__ import annotations

import re
import uuid

from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.memory import GIB
from nodeau.domain.model_server import SIMULATED_UUID_PREFIX

SPEC_FORM = (
    'expected "<count> x <size> GiB", several joined by commas (e.g. "1 x 24 GiB, 1 x 16 GiB")'
)
MAX_CARDS = 64
MAX_CARD_GIB = 4096
SIMULATED_DRIVER = "simulated"

_PART = re.compile(r"\s*([0-9]+)\s*x\s*([0-9]+)\s*GiB\s*")
# a fixed namespace, so UUIDs stay the same across releases
_NAMESPACE = uuid.UUID("5d1f0c62-6a47-4f55-9a1c-3b7e0a6c2d90")


def _parse_parts(text: str) -> tuple[tuple[int, int], ...]:
    """The (count, GiB) pairs of a spec, in order; ValueError naming the expected form."""
    if not text.strip():
        raise ValueError(f"empty simulated hardware spec: {SPEC_FORM}")
    parts = []
    for part in text.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            raise ValueError(f"bad simulated hardware spec {text!r}: {SPEC_FORM}")
        count, gib = int(match[1]), int(match[2])
        if not 1 <= count <= MAX_CARDS:
            raise ValueError(
                f"bad simulated hardware spec {text!r}: {count} cards (1 to {MAX_CARDS} at a time)"
            )
        if not 1 <= gib <= MAX_CARD_GIB:
            raise ValueError(
                f"bad simulated hardware spec {text!r}: {gib} GiB a card (1 to {MAX_CARD_GIB})"
            )
        parts.append((count, gib))
    total_cards = sum(count for count, _ in parts)
    if total_cards > MAX_CARDS:
        raise ValueError(
            f"bad simulated hardware spec {text!r}: {total_cards} cards (at most {MAX_CARDS})"
        )
    return tuple(parts)


def parse_simulated_spec(text: str) -> tuple[int, ...]:
    """Bytes of each simulated card, in order: "2 x 80 GiB" is (80 GiB, 80 GiB)."""
    return tuple(gib * GIB for count, gib in _parse_parts(text) for _ in range(count))


def simulated_uuid(machine: str, index: int) -> str:
    """The stable UUID of the simulated card at ``index`` on ``machine``."""
    return f"{SIMULATED_UUID_PREFIX}{uuid.uuid5(_NAMESPACE, f'{machine}/{index}')}"


class SimulatedGpuInventory:
    """The GpuInventory of simulated cards; free memory is always the whole card."""

    def __init__(self, machine: str, spec: str) -> None:
        parts = _parse_parts(spec)
        self._machine = machine
        self._sizes = tuple(gib * GIB for count, gib in parts for _ in range(count))
        self._described = ", ".join(f"{count} x {gib} GiB" for count, gib in parts)

    def read(self) -> MachineReading:
        readings = tuple(
            GpuReading(
                gpu=Gpu(
                    uuid=simulated_uuid(self._machine, index),
                    model=f"Simulated GPU ({size // GIB} GiB)",
                    total_bytes=size,
                    simulated=True,
                ),
                free_bytes=size,
                driver_version=SIMULATED_DRIVER,
            )
            for index, size in enumerate(self._sizes)
        )
        return MachineReading(
            machine=self._machine,
            gpus=readings,
            simulated=True,
            note=f"simulated hardware: {self._described}; models run on the CPU",
        )

    def process_memory(self, pid: int) -> int | None:
        """None: a simulated card holds nothing; the runtime reports the process's RSS instead."""
        return None
