"""The GpuInventory contract, on the NVML adapter and the simulated-hardware adapter.

NVML runs against the real ``pynvml`` and against ``FakeNvml`` (pynvml's own exceptions, no
card needed). The real-library test's id (``no-nvidia-driver`` or ``nvidia-driver-loaded``)
says which path this machine proved; a Pod's server listed by NVML is proven only on a card.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pynvml  # type: ignore[import-untyped]
import pytest

from nodeau.adapters.nvml_inventory import NO_GPU, NvmlGpuInventory
from nodeau.adapters.simulated_inventory import (
    SimulatedGpuInventory,
    parse_simulated_spec,
    simulated_uuid,
)
from nodeau.domain.hardware import CardProcess
from nodeau.domain.memory import GIB, MIB
from nodeau.ports.hardware import GpuInventory, HardwareError
from tests.support.fakes.fake_nvml import H100_UUID, L4_UUID, FakeNvml, nvml_error, two_cards

# -- the contract, on every adapter ---------------------------------------------------------

ADAPTERS: dict[str, Callable[[], GpuInventory]] = {
    "nvml-real-library": lambda: NvmlGpuInventory("node-a"),
    "nvml-two-cards": lambda: NvmlGpuInventory("node-a", nvml=two_cards()),
    "nvml-no-driver": lambda: NvmlGpuInventory(
        "node-a",
        nvml=FakeNvml([], fail={"nvmlInit": nvml_error(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)}),
    ),
    "nvml-no-devices": lambda: NvmlGpuInventory("node-a", nvml=FakeNvml([])),
    "simulated-one": lambda: SimulatedGpuInventory("node-a", "1 x 24 GiB"),
    "simulated-mixed": lambda: SimulatedGpuInventory("node-a", "2 x 80 GiB, 1 x 16 GiB"),
}


@pytest.fixture(params=sorted(ADAPTERS))
def inventory(request: pytest.FixtureRequest) -> GpuInventory:
    return ADAPTERS[request.param]()


def test_a_reading_names_each_card_once_with_plausible_memory(inventory: GpuInventory) -> None:
    reading = inventory.read()
    uuids = [r.gpu.uuid for r in reading.gpus]
    assert len(uuids) == len(set(uuids))
    assert all(u.strip() for u in uuids)
    assert all(0 <= r.free_bytes <= r.gpu.total_bytes for r in reading.gpus)
    assert all(r.driver_version for r in reading.gpus)
    assert reading.machine == "node-a"
    assert reading.note.strip() and "\n" not in reading.note


def test_simulated_is_said_everywhere_or_nowhere(inventory: GpuInventory) -> None:
    reading = inventory.read()
    assert all(r.gpu.simulated is reading.simulated for r in reading.gpus)
    assert ("simulated" in reading.note) is reading.simulated


def test_no_cards_is_a_plain_note_not_an_error(inventory: GpuInventory) -> None:
    reading = inventory.read()
    assert bool(reading.gpus) or reading.note.startswith(f"{NO_GPU}: ")


def test_a_reading_makes_an_agent_report_of_the_same_cards(inventory: GpuInventory) -> None:
    reading = inventory.read()
    at = datetime(2026, 1, 2, tzinfo=UTC)
    report = reading.as_report(at)
    assert report.gpus == tuple(r.gpu for r in reading.gpus)
    assert (report.machine, report.reported_at) == ("node-a", at)


def test_reading_twice_gives_the_same_cards(inventory: GpuInventory) -> None:
    first, second = inventory.read(), inventory.read()
    assert [r.gpu for r in first.gpus] == [r.gpu for r in second.gpus]


def test_an_unknown_process_holds_nothing_readable(inventory: GpuInventory) -> None:
    # pid 0 is never a user process: no card lists it
    assert inventory.process_memory(0) is None


# -- NVML: the real library on this machine ---------------------------------------------------


# The NVIDIA kernel driver's own file: whether this machine has a loaded driver, known
# without NVML, so the real library's answer is checked against something it did not say.
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")
HERE = "nvidia-driver-loaded" if NVIDIA_DRIVER.is_file() else "no-nvidia-driver"


@pytest.mark.parametrize("here", [HERE])  # the test's id says which branch this machine proves
def test_the_real_nvml_library_finds_cards_exactly_where_the_nvidia_driver_is_loaded(
    here: str,
) -> None:
    """Without an NVIDIA driver (CI, this VM; id ``no-nvidia-driver``): no cards and a plain
    note saying why. With one (id ``nvidia-driver-loaded``): the real cards, named by NVML
    UUID, with the driver's version, the one the kernel module reports. A reading that does
    not match the machine fails either way."""
    reading = NvmlGpuInventory("here").read()
    assert reading.simulated is False
    if here == "no-nvidia-driver":
        assert reading.gpus == (), reading.note
        assert reading.note.startswith(f"{NO_GPU}: ")
        assert len(reading.note) > len(f"{NO_GPU}: ")
    else:
        assert reading.gpus, reading.note
        assert all(r.gpu.uuid.startswith(("GPU-", "MIG-")) for r in reading.gpus)
        assert all(not r.gpu.simulated for r in reading.gpus)
        module = NVIDIA_DRIVER.read_text()
        assert all(r.driver_version and r.driver_version in module for r in reading.gpus)
        assert "NVIDIA GPU" in reading.note


# -- NVML: parsing and error mapping, against the stand-in module ------------------------------


def test_nvml_cards_are_read_by_uuid_with_name_memory_and_driver() -> None:
    nvml = two_cards()
    reading = NvmlGpuInventory("node-a", nvml=nvml).read()
    assert [(r.gpu.uuid, r.gpu.model, r.gpu.total_bytes, r.free_bytes) for r in reading.gpus] == [
        (H100_UUID, "NVIDIA H100 80GB HBM3", 80 * GIB, 79 * GIB),
        (L4_UUID, "NVIDIA L4", 23034 * MIB, 0),
    ]
    assert [r.driver_version for r in reading.gpus] == ["550.54.15", "550.54.15"]
    assert not any(r.gpu.simulated for r in reading.gpus)
    assert reading.note == "2 NVIDIA GPUs, driver 550.54.15 (NVML)"
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_one_nvml_card_and_a_bytes_driver_version() -> None:
    nvml = FakeNvml(
        [{"uuid": H100_UUID, "name": "NVIDIA H100", "total": 80 * GIB, "free": 80 * GIB}],
        driver=b"535.161.08",
    )
    reading = NvmlGpuInventory("node-b", nvml=nvml).read()
    assert reading.note == "1 NVIDIA GPU, driver 535.161.08 (NVML)"
    assert reading.gpus[0].driver_version == "535.161.08"


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (
            pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
            "the NVML library (part of the NVIDIA driver) is not installed"
            " (NVML Shared Library Not Found)",
        ),
        (
            pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
            "the NVIDIA driver is not loaded (Driver Not Loaded)",
        ),
        (
            pynvml.NVML_ERROR_NO_PERMISSION,
            "no permission to use the NVIDIA driver (Insufficient Permissions)",
        ),
        (
            pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            "the NVML library and the loaded NVIDIA driver differ in version (reboot or reload it)"
            " (RM has detected an NVML/RM version mismatch.)",
        ),
        (pynvml.NVML_ERROR_UNKNOWN, "Unknown Error"),
    ],
)
def test_nvml_that_will_not_start_means_no_gpu_found(code: int, said: str) -> None:
    nvml = FakeNvml([], fail={"nvmlInit": nvml_error(code)})
    reading = NvmlGpuInventory("node-a", nvml=nvml).read()
    assert reading == reading.__class__(
        machine="node-a", gpus=(), simulated=False, note=f"no NVIDIA GPU found: {said}"
    )
    assert nvml.shutdowns == 0  # nothing was initialised, so nothing is shut down


def test_a_driver_with_no_devices_is_no_gpu_found() -> None:
    nvml = FakeNvml([])
    reading = NvmlGpuInventory("node-a", nvml=nvml).read()
    assert reading.gpus == ()
    assert reading.note == "no NVIDIA GPU found: the driver reports no devices"
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


@pytest.mark.parametrize(
    ("call", "code", "said"),
    [
        ("nvmlDeviceGetCount", pynvml.NVML_ERROR_UNKNOWN, "Unknown Error"),
        ("nvmlSystemGetDriverVersion", pynvml.NVML_ERROR_TIMEOUT, "Timeout"),
        ("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_GPU_IS_LOST, "GPU is lost"),
        ("nvmlDeviceGetUUID", pynvml.NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"),
        ("nvmlDeviceGetMemoryInfo", pynvml.NVML_ERROR_GPU_IS_LOST, "GPU is lost"),
    ],
)
def test_nvml_failures_after_start_are_one_line_hardware_errors(
    call: str, code: int, said: str
) -> None:
    nvml = two_cards(fail={call: nvml_error(code)})
    with pytest.raises(HardwareError) as caught:
        NvmlGpuInventory("node-a", nvml=nvml).read()
    assert str(caught.value) == f"NVML on node-a: {said}"
    assert isinstance(caught.value.__cause__, pynvml.NVMLError)
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_a_failing_shutdown_does_not_spoil_the_reading() -> None:
    nvml = two_cards(fail={"nvmlShutdown": nvml_error(pynvml.NVML_ERROR_UNKNOWN)})
    reading = NvmlGpuInventory("node-a", nvml=nvml).read()
    assert len(reading.gpus) == 2
    assert nvml.shutdowns == 1


def test_a_card_without_memory_is_a_hardware_error() -> None:
    nvml = FakeNvml([{"uuid": H100_UUID, "name": "odd", "total": 0, "free": 0}])
    with pytest.raises(HardwareError, match=f"card {H100_UUID} reports 0 bytes"):
        NvmlGpuInventory("node-a", nvml=nvml).read()
    assert nvml.shutdowns == 1


def test_nvml_process_memory_sums_a_pid_over_cards() -> None:
    nvml = two_cards(processes={0: [(41, 3 * GIB), (42, 5 * GIB)], 1: [(42, 1 * GIB)]})
    inventory = NvmlGpuInventory("node-a", nvml=nvml)
    assert inventory.process_memory(42) == 6 * GIB
    assert inventory.process_memory(41) == 3 * GIB
    assert inventory.process_memory(43) is None
    assert (nvml.inits, nvml.shutdowns) == (3, 3)


def test_nvml_process_memory_is_none_where_it_cannot_be_read() -> None:
    hidden = two_cards(processes={0: [(42, None)]})  # the driver does not report the figure
    assert NvmlGpuInventory("node-a", nvml=hidden).process_memory(42) is None
    broken = two_cards(
        processes={0: [(42, GIB)]},
        fail={"nvmlDeviceGetComputeRunningProcesses": nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)},
    )
    assert NvmlGpuInventory("node-a", nvml=broken).process_memory(42) is None
    assert broken.shutdowns == 1
    absent = FakeNvml([], fail={"nvmlInit": nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)})
    assert NvmlGpuInventory("node-a", nvml=absent).process_memory(42) is None


def test_nvml_processes_name_each_card_by_uuid_with_the_bytes_held_there() -> None:
    nvml = two_cards(processes={0: [(41, 3 * GIB), (42, 5 * GIB)], 1: [(42, 1 * GIB)]})
    listed = NvmlGpuInventory("node-a", nvml=nvml).processes()
    assert listed == (
        CardProcess(pid=41, gpu_uuid=H100_UUID, used_bytes=3 * GIB),
        CardProcess(pid=42, gpu_uuid=H100_UUID, used_bytes=5 * GIB),
        CardProcess(pid=42, gpu_uuid=L4_UUID, used_bytes=1 * GIB),  # its UUID was bytes
    )
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_nvml_processes_leave_out_a_figure_the_driver_does_not_report() -> None:
    nvml = two_cards(processes={0: [(41, None), (42, 0)], 1: [(0, GIB)]})
    assert NvmlGpuInventory("node-a", nvml=nvml).processes() == (
        CardProcess(pid=42, gpu_uuid=H100_UUID, used_bytes=0),
    )


def test_nvml_processes_are_none_without_a_driver_and_a_hardware_error_when_unlisted() -> None:
    absent = FakeNvml([], fail={"nvmlInit": nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)})
    assert NvmlGpuInventory("node-a", nvml=absent).processes() == ()
    broken = two_cards(
        processes={0: [(42, GIB)]},
        fail={"nvmlDeviceGetComputeRunningProcesses": nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)},
    )
    with pytest.raises(HardwareError) as caught:
        NvmlGpuInventory("node-a", nvml=broken).processes()
    assert str(caught.value) == "NVML on node-a: cannot list the cards' processes: GPU is lost"
    assert isinstance(caught.value.__cause__, pynvml.NVMLError)
    assert (broken.inits, broken.shutdowns) == (1, 1)


@pytest.mark.parametrize("here", [HERE])
def test_the_real_nvml_library_lists_processes_only_where_the_nvidia_driver_is_loaded(
    here: str,
) -> None:
    """Without a driver (id ``no-nvidia-driver``): no processes, not an error. With one:
    each listed on a card this machine has, by its UUID."""
    inventory = NvmlGpuInventory("here")
    listed = inventory.processes()
    if here == "no-nvidia-driver":
        assert listed == ()
    else:
        cards = {r.gpu.uuid for r in inventory.read().gpus}
        assert all(p.gpu_uuid in cards and p.pid > 0 for p in listed)


def test_nvml_compute_capabilities_are_named_as_cmake_names_them_by_uuid() -> None:
    nvml = two_cards()
    nvml.cards[1]["capability"] = (8, 9)
    assert NvmlGpuInventory("node-a", nvml=nvml).compute_capabilities() == {
        H100_UUID: "90",
        L4_UUID: "89",
    }
    assert (nvml.inits, nvml.shutdowns) == (1, 1)
    absent = FakeNvml([], fail={"nvmlInit": nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)})
    assert NvmlGpuInventory("node-a", nvml=absent).compute_capabilities() == {}
    lost = two_cards(fail={"nvmlDeviceGetCudaComputeCapability": nvml_error(
        pynvml.NVML_ERROR_GPU_IS_LOST)})  # fmt: skip
    with pytest.raises(HardwareError, match=r"^NVML on node-a: cannot read compute capabilities"):
        NvmlGpuInventory("node-a", nvml=lost).compute_capabilities()


@pytest.mark.parametrize("here", [HERE])
def test_the_real_nvml_library_reads_compute_capabilities_only_where_the_driver_is(
    here: str,
) -> None:
    """What ``nodeau server install --cuda`` builds for: nothing without a driver (id
    ``no-nvidia-driver``), every card's capability by its UUID with one."""
    inventory = NvmlGpuInventory("here")
    found = inventory.compute_capabilities()
    if here == "no-nvidia-driver":
        assert found == {}
    else:
        assert set(found) == {r.gpu.uuid for r in inventory.read().gpus}
        assert all(c.isdigit() and int(c) >= 50 for c in found.values())


# -- simulated hardware ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "sizes"),
    [
        ("1 x 24 GiB", (24 * GIB,)),
        ("2 x 80 GiB", (80 * GIB, 80 * GIB)),
        ("1 x 24 GiB, 1 x 16 GiB", (24 * GIB, 16 * GIB)),
        ("  1x24GiB ,2 x 8 GiB ", (24 * GIB, 8 * GIB, 8 * GIB)),
        ("64 x 1 GiB", (GIB,) * 64),
        ("1 x 4096 GiB", (4096 * GIB,)),
    ],
)
def test_simulated_specs_parse_to_bytes_per_card(spec: str, sizes: tuple[int, ...]) -> None:
    assert parse_simulated_spec(spec) == sizes


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "empty simulated hardware spec"),
        ("   ", "empty simulated hardware spec"),
        ("24 GiB", "bad simulated hardware spec"),
        ("1 x 24 GB", "bad simulated hardware spec"),
        ("1 x 24 gib", "bad simulated hardware spec"),
        ("1 x 24.5 GiB", "bad simulated hardware spec"),
        ("-1 x 24 GiB", "bad simulated hardware spec"),
        ("1 x 24 GiB,", "bad simulated hardware spec"),
        ("1 X 24 GiB", "bad simulated hardware spec"),
        ("1 x 24 GiB; 1 x 16 GiB", "bad simulated hardware spec"),
        ("0 x 24 GiB", "0 cards"),
        ("65 x 1 GiB", "65 cards"),
        ("1 x 0 GiB", "0 GiB a card"),
        ("1 x 4097 GiB", "4097 GiB a card"),
        ("40 x 1 GiB, 30 x 1 GiB", "70 cards (at most 64)"),
    ],
)
def test_a_bad_simulated_spec_is_one_line_saying_the_expected_form(spec: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_simulated_spec(spec)
    message = str(caught.value)
    assert problem in message and "\n" not in message
    if "cards" not in problem and "a card" not in problem:
        assert 'expected "<count> x <size> GiB"' in message
    with pytest.raises(ValueError):
        SimulatedGpuInventory("node-a", spec)


def test_simulated_cards_say_so_and_are_free_and_stable() -> None:
    reading = SimulatedGpuInventory("laptop", "1 x 24 GiB, 1 x 16 GiB").read()
    assert reading.simulated is True
    assert reading.note == "simulated hardware: 1 x 24 GiB, 1 x 16 GiB; models run on the CPU"
    seen = [(r.gpu.model, r.gpu.total_bytes, r.free_bytes, r.driver_version) for r in reading.gpus]
    assert seen == [
        ("Simulated GPU (24 GiB)", 24 * GIB, 24 * GIB, "simulated"),
        ("Simulated GPU (16 GiB)", 16 * GIB, 16 * GIB, "simulated"),
    ]
    assert all(r.gpu.simulated for r in reading.gpus)
    assert [r.gpu.uuid for r in reading.gpus] == [
        simulated_uuid("laptop", 0),
        simulated_uuid("laptop", 1),
    ]
    again = SimulatedGpuInventory("laptop", "1 x 24 GiB, 1 x 16 GiB").read()
    assert again == reading


def test_simulated_uuids_differ_between_machines_and_are_never_nvidia_uuids() -> None:
    a = SimulatedGpuInventory("a", "2 x 24 GiB").read()
    b = SimulatedGpuInventory("b", "2 x 24 GiB").read()
    uuids = [r.gpu.uuid for r in (*a.gpus, *b.gpus)]
    assert len(set(uuids)) == 4
    assert all(u.startswith("SIM-GPU-") for u in uuids)
    # a fixed derivation: this value must never change between releases
    assert simulated_uuid("a", 0) == "SIM-GPU-1a583e04-20ce-5c39-b1e6-b4ec4d9da3ea"
    assert simulated_uuid("a", 0) != simulated_uuid("a", 1)


def test_a_simulated_card_reports_no_process_memory() -> None:
    assert SimulatedGpuInventory("a", "1 x 24 GiB").process_memory(1) is None
