"""A stand-in for the ``pynvml`` module, checked by the GpuInventory contract suite.

``FakeNvml`` answers the calls the NVML adapter makes on listed cards and raises pynvml's
own errors (``nvml_error``); ``two_cards`` is an H100 and an L4, the latter's strings
given as bytes as some pynvml versions give them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml  # type: ignore[import-untyped]

from nodeau.domain.memory import GIB, MIB

H100_UUID = "GPU-6a2b3c4d-0000-1111-2222-333344445555"
L4_UUID = "GPU-0f1e2d3c-aaaa-bbbb-cccc-ddddeeeeffff"


def nvml_error(code: int) -> pynvml.NVMLError:
    """pynvml's own exception for an NVML return code (e.g. NVMLError_GpuIsLost)."""
    return pynvml.NVMLError(code)


class FakeNvml:
    """A stand-in for the ``pynvml`` module: the calls the adapter makes, on listed cards.

    ``fail`` maps a function name to the NVMLError it raises. Counts of
    nvmlInit/nvmlShutdown let tests check that every session is closed.
    """

    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        cards: list[dict[str, Any]],
        *,
        driver: str | bytes = "550.54.15",
        processes: dict[int, list[tuple[int, int | None]]] | None = None,
        fail: dict[str, pynvml.NVMLError] | None = None,
    ) -> None:
        self.cards = cards
        self.driver = driver
        self.processes = processes or {}  # card index -> [(pid, bytes or None)]
        self.fail = fail or {}
        self.inits = 0
        self.shutdowns = 0

    def _call(self, name: str) -> None:
        if name in self.fail:
            raise self.fail[name]

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1
        self._call("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(self.cards)

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._call("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.cards):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str | bytes:
        self._call("nvmlDeviceGetUUID")
        uuid: str | bytes = self.cards[handle]["uuid"]
        return uuid

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        self._call("nvmlDeviceGetName")
        name: str | bytes = self.cards[handle]["name"]
        return name

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        self._call("nvmlDeviceGetMemoryInfo")
        card = self.cards[handle]
        return SimpleNamespace(
            total=card["total"], free=card["free"], used=card["total"] - card["free"]
        )

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        self._call("nvmlDeviceGetCudaComputeCapability")
        capability: tuple[int, int] = self.cards[handle].get("capability", (9, 0))
        return capability

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        self._call("nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=used)
            for pid, used in self.processes.get(handle, [])
        ]


def two_cards(**kwargs: Any) -> FakeNvml:
    return FakeNvml(
        [
            {
                "uuid": H100_UUID,
                "name": "NVIDIA H100 80GB HBM3",
                "total": 80 * GIB,
                "free": 79 * GIB,
            },
            # some pynvml versions return bytes: the adapter decodes them
            {"uuid": L4_UUID.encode(), "name": b"NVIDIA L4", "total": 23034 * MIB, "free": 0},
        ],
        **kwargs,
    )
