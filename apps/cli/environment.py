"""``nodeau environment``: what this machine has, read-only, and how it is served.

Always this machine, whichever plane commands act on: its cards (by UUID), the model
server ``run`` would start, and how it is served (``domain.platforms`` of the platform
the composition root read: a Mac is never a fleet node).
"""

from __future__ import annotations

import json as json_module
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import size, table, to_json
from nodeau.domain.hardware import MachineReading
from nodeau.domain.model_server import ServerAbilities, abilities_text
from nodeau.domain.platforms import how_served
from nodeau.ports.errors import NodeauError

if TYPE_CHECKING:
    from nodeau.apps.cli.bootstrap import LazyMachineParts
    from nodeau.domain.platforms import Serving


def environment(*, json: bool = False) -> int:
    """What this machine has, read-only: its GPUs by UUID, or why it has none, and how it is
    served (a Mac: standalone, never a fleet node).

    Parameters
    ----------
    json
        Print the reading as JSON; its "server" says the model server line as fields:
        line, found, name, version, uses ("CPU only", "CUDA (...)"), cpu_only, backends,
        program, reason, and abilities (what the binary said, devices included); its
        "served" says how this machine is served: platform, fleet_node, sentence.
    """

    parts = bootstrap.machine_parts()
    reading = parts.cards
    server = server_reading(parts)
    served = how_served(bootstrap.this_platform())
    if json:
        print(environment_json(reading, server, served))
        return 0
    print("\n".join(environment_lines(reading, server, served)))
    return 0


def environment_json(reading: MachineReading, server: ServerReading, served: Serving) -> str:
    """``environment --json``: the reading, its model server, and how the machine is served."""

    document = json_module.loads(to_json(reading))
    document["server"] = json_module.loads(to_json(server))
    document["served"] = json_module.loads(to_json(served))
    return json_module.dumps(document, indent=2)


def environment_lines(reading: MachineReading, server: ServerReading, served: Serving) -> list[str]:
    """``environment`` for a person: the machine, how it is served, its server, its cards."""
    lines = [
        f"machine  {reading.machine}{' (SIMULATED hardware)' if reading.simulated else ''}",
        f"served   {served.sentence}",
        f"note     {reading.note}",
        f"server   {server.line}",
    ]
    if server.program:
        lines.append(f"         {server.program}: {server.reason}")
    rows = [
        (r.gpu.uuid, r.gpu.model, size(r.gpu.total_bytes), size(r.free_bytes), r.driver_version)
        for r in reading.gpus
    ]
    if rows:
        lines.append(table(("GPU", "MODEL", "TOTAL", "FREE (READING)", "DRIVER"), rows))
    return lines


@frozen(kw_only=True)
class ServerReading:
    """The model server ``run`` would start here: what it can use, in one line, which
    program and why it was chosen; or, with no program, why there is none."""

    line: str
    found: bool = False  # whether there is a model server to start
    name: str | None = None  # "llama-server"
    version: str | None = None  # as the binary names itself
    uses: str | None = None  # the line's end: "CPU only", "CUDA (CUDA0 ...)", ...
    cpu_only: bool | None = None  # None: it could not be asked, or there is none
    backends: tuple[str, ...] = ()  # besides the CPU's, e.g. ("CUDA",)
    program: str | None = None
    reason: str | None = None
    abilities: ServerAbilities | None = None


def server_reading(parts: LazyMachineParts | None = None) -> ServerReading:
    """Which model server ``run`` would start on this machine and what it can use (asked of
    the binary itself); or why there is none, naming ``nodeau server install``."""

    parts = parts or bootstrap.machine_parts()
    try:
        choice = parts.choice
        abilities = parts.server
    except NodeauError as exc:
        return ServerReading(line=exc.one_line())
    line = abilities_text(abilities)
    return ServerReading(
        line=line,
        found=True,
        name=abilities.server,
        version=abilities.version,
        uses=line.removeprefix(f"{abilities.server} {abilities.version}: "),
        cpu_only=abilities.cpu_only if abilities.known else None,
        backends=abilities.backends,
        program=str(choice.program),
        reason=choice.reason,
        abilities=abilities,
    )


def server_line() -> str:
    """Which model server ``run`` would start, what it can use and why; or why there is none."""
    server = server_reading()
    return server.line if server.program is None else f"{server.line} ({server.program})"
