"""``nodeau environment`` says how this machine is served: a Mac standalone, on its own
execution plane and never a fleet node; any other machine on its own or as a fleet's node.
The platform is a value the composition root reads (``bootstrap.this_platform``), so on
Linux the Mac's lines are proved by giving "darwin" to what prints them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.apps.cli.environment import ServerReading, environment_json, environment_lines
from nodeau.domain.platforms import how_served
from tests.support.real.cli import Cli

READING = SimulatedGpuInventory("box", "1 x 24 GiB").read()
SERVER = ServerReading(line="no model server found: run `nodeau server install`")
MAC = (
    "standalone, on its own execution plane: a Mac is never a node of a fleet (nodeau join refuses)"
)
LINUX = (
    "on its own (a fleet of one), or as a node of a fleet on Kubernetes once it joins one "
    "(nodeau join)"
)


def test_on_a_mac_environment_says_standalone_on_its_own_execution_plane() -> None:
    lines = environment_lines(READING, SERVER, how_served("darwin"))
    assert lines[:2] == ["machine  box (SIMULATED hardware)", f"served   {MAC}"]
    served = json.loads(environment_json(READING, SERVER, how_served("darwin")))["served"]
    assert served == {"platform": "darwin", "fleet_node": False, "sentence": MAC}


def test_on_linux_environment_says_it_may_join_a_fleet() -> None:
    assert environment_lines(READING, SERVER, how_served("linux"))[1] == f"served   {LINUX}"
    served = json.loads(environment_json(READING, SERVER, how_served("linux")))["served"]
    assert served == {"platform": "linux", "fleet_node": True, "sentence": LINUX}


def test_the_installed_command_says_how_this_machine_is_served(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    here = how_served(sys.platform)
    reading = cli.json("environment")
    assert isinstance(reading, dict)
    assert reading["served"] == {
        "platform": here.platform,
        "fleet_node": here.fleet_node,
        "sentence": here.sentence,
    }
    done = cli("environment")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == f"served   {here.sentence}"
