"""This machine's NVIDIA cards, read with NVML (``pynvml`` from the ``nvidia-ml-py`` package).

Why it is so: docs/adr/decisions/adapters.md (nvml_inventory.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from nodeau.domain.hardware import CardProcess, Gpu, GpuReading, MachineReading
from nodeau.ports.hardware import HardwareError

NO_GPU = "no NVIDIA GPU found"

# pynvml exception class name -> what it means for a person
_INIT_REASONS = {
    "NVMLError_LibraryNotFound": "the NVML library (part of the NVIDIA driver) is not installed",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is not loaded",
    "NVMLError_NoPermission": "no permission to use the NVIDIA driver",
    "NVMLError_LibRmVersionMismatch": (
        "the NVML library and the loaded NVIDIA driver differ in version (reboot or reload it)"
    ),
}


class _NvmlUnavailable(Exception):
    """nvmlInit failed: this machine has no usable NVIDIA driver."""


class NvmlGpuInventory:
    """The GpuInventory of a machine with NVIDIA cards (or without: then it says so)."""

    def __init__(self, machine: str, *, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml  # type: ignore[import-untyped]  # no stubs; tests pass a stand-in

            nvml = pynvml
        self._machine = machine
        self._nvml = nvml

    def read(self) -> MachineReading:
        try:
            with self._session():
                return self._read_cards()
        except _NvmlUnavailable as exc:
            return MachineReading(
                machine=self._machine, gpus=(), simulated=False, note=f"{NO_GPU}: {exc}"
            )

    def process_memory(self, pid: int) -> int | None:
        """Bytes ``pid`` holds over all cards, from NVML's list of compute processes.

        None when NVML is unavailable, when no card lists the process (inside a
        container NVML may list host PIDs), when the driver does not report the
        figure, or when the list cannot be read.
        """
        nvml = self._nvml
        try:
            with self._session():
                held: int | None = None
                for index in range(nvml.nvmlDeviceGetCount()):
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                    for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                        used = getattr(proc, "usedGpuMemory", None)
                        if proc.pid == pid and used is not None:
                            held = (held or 0) + int(used)
                return held
        except (_NvmlUnavailable, nvml.NVMLError):
            return None

    def processes(self) -> tuple[CardProcess, ...]:
        """Every compute process on every card, with the bytes NVML says it holds there
        (``nvmlDeviceGetComputeRunningProcesses``: host PIDs, ``usedGpuMemory``).

        None where NVML is unavailable (no driver: no cards to hold anything). A process
        whose figure the driver does not report (``usedGpuMemory`` None) is left out. A
        list that cannot be read once NVML is up is a one-line ``HardwareError``.
        """
        nvml = self._nvml
        try:
            with self._session():
                try:
                    return tuple(
                        CardProcess(pid=int(proc.pid), gpu_uuid=uuid, used_bytes=int(used))
                        for uuid, proc in self._listed()
                        if (used := getattr(proc, "usedGpuMemory", None)) is not None
                        and int(proc.pid) > 0
                    )
                except nvml.NVMLError as exc:
                    raise HardwareError(
                        f"NVML on {self._machine}: cannot list the cards' processes: {_reason(exc)}"
                    ) from exc
        except _NvmlUnavailable:
            return ()

    def compute_capabilities(self) -> dict[str, str]:
        """Each card's CUDA compute capability as CMake names it (``90`` for 9.0), by UUID;
        empty where NVML is unavailable. What ``nodeau server install --cuda`` builds for."""
        nvml = self._nvml
        try:
            with self._session():
                try:
                    found = {}
                    for index in range(int(nvml.nvmlDeviceGetCount())):
                        handle = nvml.nvmlDeviceGetHandleByIndex(index)
                        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                        found[_text(nvml.nvmlDeviceGetUUID(handle))] = f"{major}{minor}"
                    return found
                except nvml.NVMLError as exc:
                    raise HardwareError(
                        f"NVML on {self._machine}: cannot read compute capabilities: "
                        f"{_reason(exc)}"
                    ) from exc
        except _NvmlUnavailable:
            return {}

    def _listed(self) -> Iterator[tuple[str, Any]]:
        nvml = self._nvml
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                yield uuid, proc

    @contextmanager
    def _session(self) -> Iterator[None]:
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise _NvmlUnavailable(_init_reason(exc)) from exc
        try:
            yield
        finally:
            with suppress(nvml.NVMLError):  # nothing to undo; the reading (or its error) stands
                nvml.nvmlShutdown()

    def _read_cards(self) -> MachineReading:
        nvml = self._nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
            if count == 0:
                return MachineReading(
                    machine=self._machine,
                    gpus=(),
                    simulated=False,
                    note=f"{NO_GPU}: the driver reports no devices",
                )
            driver = _text(nvml.nvmlSystemGetDriverVersion())
            readings = tuple(self._read_card(index, driver) for index in range(count))
        except nvml.NVMLError as exc:
            raise HardwareError(f"NVML on {self._machine}: {_reason(exc)}") from exc
        cards = "1 NVIDIA GPU" if count == 1 else f"{count} NVIDIA GPUs"
        return MachineReading(
            machine=self._machine,
            gpus=readings,
            simulated=False,
            note=f"{cards}, driver {driver} (NVML)",
        )

    def _read_card(self, index: int, driver: str) -> GpuReading:
        nvml = self._nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        name = _text(nvml.nvmlDeviceGetName(handle))
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        total, free = int(memory.total), int(memory.free)
        if total <= 0:
            raise HardwareError(f"NVML on {self._machine}: card {uuid} reports {total} bytes")
        return GpuReading(
            gpu=Gpu(uuid=uuid, model=name, total_bytes=total),
            free_bytes=free,
            driver_version=driver,
        )


def _text(value: str | bytes) -> str:
    # pynvml returns str on Python 3 for most calls, bytes for a few versions' calls
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _init_reason(exc: BaseException) -> str:
    known = _INIT_REASONS.get(type(exc).__name__)
    return f"{known} ({_reason(exc)})" if known else _reason(exc)
