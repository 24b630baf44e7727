"""What a model server can use, and the rule that a real card goes only to one that can.

A server's abilities are what its binary says: its backends and the devices it sees. A
real card goes only to a CUDA server that sees a CUDA device, else the run is refused
(``capacity.server-cannot-use-card``) unless it asked for the CPU (docs/adr/0019).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from attrs import field, frozen

from nodeau.domain.checks import not_negative
from nodeau.domain.hardware import Gpu, Machine
from nodeau.domain.refusals import ReasonCode, Refusal

CUDA = "CUDA"  # the backend that serves NVIDIA cards, addressed by UUID
INSTALL_CUDA = "nodeau server install --cuda"
_TRAILING_INDEX = re.compile(r"\d+$")
_ARCH = re.compile(r"^\d{2,3}[af]?$")
_MIB = 1024 * 1024
_GIB = 1024 * _MIB


@frozen(kw_only=True)
class ServerDevice:
    """One device a model server sees, as it names it (``CUDA0``), with its memory."""

    name: str
    description: str
    total_bytes: int = field(default=0, validator=not_negative)
    free_bytes: int = field(default=0, validator=not_negative)

    @property
    def backend(self) -> str:
        """The backend the device belongs to: its name without the index (``CUDA``)."""
        return _TRAILING_INDEX.sub("", self.name)


@frozen(kw_only=True)
class ServerAbilities:
    """What one model server binary can use, as it said when asked."""

    server: str  # "llama-server"
    program: str  # the binary's path
    version: str  # as the binary names itself, e.g. "b1-0c1e570"
    backends: tuple[str, ...] = ()  # the backends besides the CPU's, e.g. ("CUDA",)
    devices: tuple[ServerDevice, ...] = ()  # the devices it saw (never the CPU)
    note: str = ""  # what it said when it saw none of a backend's devices
    known: bool = True  # False: it could not be asked (its backends are not known)

    @property
    def cpu_only(self) -> bool:
        return not self.backends

    @property
    def splits_layers(self) -> bool:
        """Whether it takes a model split by layers across cards (llama-server's
        ``--tensor-split``; llama-cpp-python's server is not given one)."""
        return self.server == "llama-server"

    def devices_of(self, backend: str) -> tuple[ServerDevice, ...]:
        return tuple(d for d in self.devices if d.backend == backend)


def abilities_text(server: ServerAbilities) -> str:
    """One line for a person: ``llama-server b1-0c1e570: CUDA (CUDA0 NVIDIA H200, 139.8 GiB)``,
    ``... : CPU only``, or a backend whose devices it did not see, and why."""
    head = f"{server.server} {server.version}"
    if not server.known:
        return f"{head}: backends not known ({server.note})"
    if server.cpu_only:
        return f"{head}: CPU only"
    parts = []
    for backend in server.backends:
        seen = server.devices_of(backend)
        if seen:
            listed = ", ".join(
                f"{d.name} {d.description}, {d.total_bytes / _GIB:.1f} GiB" for d in seen
            )
            parts.append(f"{backend} ({listed})")
        else:
            why = f": {server.note}" if server.note else ""
            parts.append(f"{backend} (no {backend} device seen{why})")
    return f"{head}: {'; '.join(parts)}"


def card_refusal(
    server: ServerAbilities, cards: tuple[Gpu, ...], *, on_cpu: bool
) -> Refusal | None:
    """Why ``server`` may not be given ``cards`` (None: it may).

    Simulated cards and a run that asked for the CPU need nothing of the server; a real
    card needs a CUDA backend that sees at least one CUDA device."""
    real = tuple(c for c in cards if not c.simulated)
    if on_cpu or not real:
        return None
    which = f"{server.server} {server.version} ({server.program})"
    if not server.known:
        return Refusal.of(
            ReasonCode.SERVER_CANNOT_USE_CARD,
            f"Nodeau cannot ask the model server {which} which devices it uses "
            f"({server.note}), so it is not given {_cards_words(real)}; build one it can ask "
            f"with `{INSTALL_CUDA}`, or run it on the CPU with --cpu",
        )
    if CUDA not in server.backends:
        return Refusal.of(
            ReasonCode.SERVER_CANNOT_USE_CARD,
            f"the model server {which} is built for the CPU only: it cannot use "
            f"{_cards_words(real)}; build one that can with `{INSTALL_CUDA}`, or run it on "
            "the CPU with --cpu",
        )
    if not server.devices_of(CUDA):
        why = f" ({server.note})" if server.note else ""
        return Refusal.of(
            ReasonCode.SERVER_CANNOT_USE_CARD,
            f"the model server {which} has CUDA but sees no CUDA device here{why}, so it "
            f"cannot use {_cards_words(real)}; check the NVIDIA driver (nvidia-smi), or run it "
            "on the CPU with --cpu",
        )
    return None


def _cards_words(cards: tuple[Gpu, ...]) -> str:
    return ", ".join(f"{c.uuid} ({c.model})" for c in cards)


@frozen(kw_only=True)
class BuildAsk:
    """What to build: ``cpu``, or ``cuda`` for these compute architectures (``("90",)``)."""

    backend: str
    cuda_archs: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.backend not in ("cpu", "cuda"):
            raise ValueError(f"backend must be cpu or cuda, got {self.backend!r}")
        if (self.backend == "cuda") != bool(self.cuda_archs):
            raise ValueError("a CUDA build names its architectures, a CPU build none")

    @property
    def flavour(self) -> str:
        """The build's folder name: ``cpu`` or ``cuda-80-90``."""
        return "cpu" if self.backend == "cpu" else "cuda-" + "-".join(self.cuda_archs)


@frozen(kw_only=True)
class InstallChoice:
    """What ``nodeau server install`` builds, and why, in words."""

    ask: BuildAsk
    why: str


def install_choice(
    *, cpu: bool, cuda: bool, archs: str | None, cards: dict[str, str]
) -> InstallChoice | str:
    """The build to make from the options (``--cpu``, ``--cuda``, ``--cuda-arch 80,90``) and
    the compute capability of each card here (by UUID, ``{"GPU-...": "90"}``); or why the
    options cannot be met, in one sentence.

    With neither option: CUDA for the cards here when there are any, else the CPU."""
    if cpu and (cuda or archs):
        return "--cpu builds for the CPU alone: leave out --cuda and --cuda-arch"
    if cpu:
        return InstallChoice(ask=BuildAsk(backend="cpu"), why="the CPU (asked with --cpu)")
    if archs is not None:
        named = tuple(a.strip() for a in archs.split(",") if a.strip())
        wrong = [a for a in named if not _ARCH.match(a)]
        if wrong or not named:
            return (
                f"--cuda-arch {archs!r}: name compute capabilities as CMake does, comma "
                "separated (80 for A100, 86 for RTX 30, 89 for RTX 40 and L4, 90 for H100/H200)"
            )
        chosen = tuple(sorted(set(named), key=lambda a: (int(a.rstrip("af")), a)))
        return InstallChoice(
            ask=BuildAsk(backend="cuda", cuda_archs=chosen),
            why=f"CUDA for compute capability {', '.join(chosen)} (asked with --cuda-arch)",
        )
    if cards:
        found = tuple(sorted(set(cards.values()), key=int))
        how = "asked with --cuda; " if cuda else ""
        return InstallChoice(
            ask=BuildAsk(backend="cuda", cuda_archs=found),
            why=f"CUDA for compute capability {', '.join(found)} ({how}read from this "
            f"machine's {len(cards)} NVIDIA card(s) by NVML)",
        )
    if cuda:
        return (
            "--cuda: no NVIDIA card here to read a compute capability from; name the "
            "architectures with --cuda-arch (e.g. --cuda-arch 90 for H100/H200)"
        )
    return InstallChoice(
        ask=BuildAsk(backend="cpu"),
        why="the CPU (no NVIDIA card found here; --cuda-arch builds for cards elsewhere)",
    )


SERVER_CANNOT = "its model server cannot use its cards"
SIMULATED_UUID_PREFIX = "SIM-GPU-"  # simulated cards' UUIDs (never an NVIDIA one, GPU-...)


def _simulated_card(uuid: str) -> bool:
    """Whether a card's UUID is a simulated card's: its model server runs on the CPU."""
    return uuid.startswith(SIMULATED_UUID_PREFIX)


def server_exclusions(
    machines: Iterable[Machine],
    servers: Mapping[str, ServerAbilities],
    *,
    cuda_image: bool,
) -> tuple[tuple[str, str], ...]:
    """The machines of a fleet whose real cards no model server there can use, each with why
    (``SERVER_CANNOT``...): no CUDA model-server image is configured, the machine's agent has
    not said what its server can use (``servers``, by machine), or it says it cannot.
    Machines with simulated cards only are never left out: their models run on the CPU."""
    out: list[tuple[str, str]] = []
    for machine in sorted(machines, key=lambda m: m.name):
        real = tuple(g for g in machine.gpus if not g.simulated)
        if not real:
            continue
        server = servers.get(machine.name)
        if not cuda_image:
            why = "no CUDA model-server image is configured (the controller's --cuda-server-image)"
        elif server is None:
            why = "its agent has not said what its model server can use"
        else:
            refusal = card_refusal(server, real, on_cpu=False)
            if refusal is None:
                continue
            why = abilities_text(server)
        out.append((machine.name, f"{SERVER_CANNOT}: {why}"))
    return tuple(out)


def uses_card(found: tuple[Machine, Gpu] | None, gpu_uuid: str) -> bool:
    """Whether a workload's model server uses its card: a real one, as its machine's report
    names it (a card no report names: a real one unless its UUID is a simulated card's)."""
    if found is None:
        return not _simulated_card(gpu_uuid)
    return not found[1].simulated
