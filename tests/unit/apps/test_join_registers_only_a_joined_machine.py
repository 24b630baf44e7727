"""``nodeau join`` registers a machine (writes ``$NODEAU_HOME/plane.json`` and says
"registered") only once it has joined: never on a Mac, never when the node-join step did
not run or failed, when the CA pin does not match the cluster, or when no kubeconfig
reaches the cluster. Each of those says what to do next and leaves the plane file
unwritten. The fleet is the contract-checked ``FakeCluster``; kubeadm is a recorder.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeau.apps.cli.cluster_join import JoinAsk, JoiningCluster, NotJoined, ThisMachine, join_fleet
from nodeau.ports.cluster import ClusterUnreachable, MachineReports
from nodeau.ports.errors import SettingsError
from tests.support.clock import ticking
from tests.support.fakes.fake_cluster import FakeCluster, machine_report

PIN = "sha256:" + "0f" * 32
OTHER_PIN = "sha256:" + "ab" * 32
TOKEN = "abcdef.0123456789abcdef"
STEP = [
    "kubeadm", "join", "10.0.0.1:6443", "--token", TOKEN,
    "--discovery-token-ca-cert-hash", PIN,
]  # fmt: skip
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


class World:
    """This machine (its home, its kubeadm) and the fleet its kubeconfig reaches."""

    def __init__(self, tmp_path: Path, *, kubeadm: bool = True, exit_status: int = 0) -> None:
        self.home = tmp_path / "home"
        self.kubeconfig = tmp_path / "kubeconfig"
        self.cluster = FakeCluster(ticking(NOW))
        self.cluster.tokens.pin = PIN
        self.cluster.add_node("cp", control_plane=True)
        self.reachable = True
        self.kubeadm = kubeadm
        self.exit_status = exit_status
        self.steps: list[list[str]] = []
        self.opened: list[Path] = []

    def run_step(self, step: list[str]) -> int:
        self.steps.append(step)
        if self.exit_status == 0:
            self.cluster.add_node("box")  # what kubeadm join does: the machine is a Node
        return self.exit_status

    def open_fleet(self, config: Path) -> JoiningCluster:
        self.opened.append(config)
        if not self.reachable:
            raise ClusterUnreachable(f"{config}: no such kubeconfig file")
        return self.cluster

    def publish_report(self, reports: MachineReports) -> str:
        reports.publish(machine_report("box", 1, at=NOW))
        return "box"

    def machine(self, platform: str = "linux") -> ThisMachine:
        return ThisMachine(
            platform=platform,
            home=self.home,
            machine="box",
            kubeadm="/usr/bin/kubeadm" if self.kubeadm else None,
            run_step=self.run_step,
            open_fleet=self.open_fleet,
            publish_report=self.publish_report,
        )

    def join(self, *, pin: str = PIN, dry_run: bool = False, platform: str = "linux") -> int:
        ask = JoinAsk(
            server="https://10.0.0.1:6443",
            token=TOKEN,
            ca_cert_hash=pin,
            kubeconfig=self.kubeconfig,
            dry_run=dry_run,
        )
        return join_fleet(ask, self.machine(platform))

    @property
    def plane_file(self) -> Path:
        return self.home / "plane.json"


def refused(
    world: World,
    capsys: pytest.CaptureFixture[str],
    *,
    pin: str = PIN,
    dry_run: bool = False,
    platform: str = "linux",
) -> str:
    """The one line ``join`` is refused with; nothing was registered or written."""
    with pytest.raises(NotJoined) as caught:
        world.join(pin=pin, dry_run=dry_run, platform=platform)
    said = caught.value.one_line()
    assert "\n" not in str(caught.value)
    assert "registered" not in capsys.readouterr().out + said
    assert not world.plane_file.exists()
    assert world.cluster.reports.read().reports == ()  # no report was published
    return said


def test_a_joined_machine_is_registered_and_publishes_its_first_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    assert world.join() == 0
    assert world.steps == [STEP]
    assert world.opened == [world.kubeconfig]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "node-join step: " + " ".join(STEP)
    assert out[1].startswith("registered: nodeau on this machine now acts on the fleet")
    assert out[2] == "agent report: published for box; the agent keeps it fresh once it runs"
    assert world.plane_file.read_text().strip().startswith('{\n  "plane": "kubernetes"')
    assert [r.machine for r in world.cluster.reports.read().reports] == ["box"]


def test_a_mac_is_refused_in_one_line_and_nothing_is_run_or_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    said = refused(world, capsys, platform="darwin")
    assert said == (
        "a Mac is never a node of a fleet: it runs standalone, on its own execution plane "
        "(nodeau run serves models here as it is); nothing was run or written"
    )
    assert (world.steps, world.opened) == ([], [])


def test_a_mac_is_refused_before_the_token_is_even_read(tmp_path: Path) -> None:
    world = World(tmp_path)
    ask = JoinAsk(
        server="https://10.0.0.1:6443",
        token="not a token",
        ca_cert_hash=PIN,
        kubeconfig=world.kubeconfig,
        dry_run=False,
    )
    with pytest.raises(NotJoined, match=r"^a Mac is never a node of a fleet"):
        join_fleet(ask, world.machine("darwin"))
    with pytest.raises(SettingsError, match=r"^--token must look like"):
        join_fleet(ask, world.machine("linux"))


def test_kubeadm_not_on_path_runs_nothing_writes_nothing_and_says_to_run_the_step_then_join(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path, kubeadm=False)
    with pytest.raises(NotJoined) as caught:
        world.join()
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "node-join step (not run: kubeadm is not on PATH): " + " ".join(STEP)
    ]
    assert caught.value.one_line() == (
        "the node-join step did not run (kubeadm is not on PATH): run the step above as root "
        "on this machine, then this nodeau join again; nothing was written"
    )
    assert "registered" not in out
    assert not world.plane_file.exists()
    assert world.steps == []


def test_after_the_step_is_run_by_hand_joining_again_registers_without_running_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path, kubeadm=False)
    with pytest.raises(NotJoined):
        world.join()
    world.cluster.add_node("box")  # the person ran the step as root: the machine is a Node
    capsys.readouterr()
    assert world.join() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "node-join step: not needed, box is already a Node of this cluster"
    assert out[1].startswith("registered: ")
    assert world.plane_file.exists() and world.steps == []


def test_a_failed_kubeadm_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path, exit_status=3)
    said = refused(world, capsys)
    assert said == (
        "kubeadm join failed (exit 3): see what it said above, then run nodeau join again; "
        "nothing was written"
    )
    assert world.steps == [STEP]


def test_a_pin_that_is_not_the_clusters_runs_nothing_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    said = refused(world, capsys, pin=OTHER_PIN)
    assert said == (
        f"--ca-cert-hash is not the CA of the cluster {world.kubeconfig} reaches (its pin is "
        f"{PIN}): the kubeconfig is for another cluster or the pin was mistyped; use the "
        "command nodeau fleet invite printed; nothing was run or written"
    )
    assert world.steps == []


def test_no_kubeconfig_that_reaches_the_cluster_runs_nothing_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    world.reachable = False
    said = refused(world, capsys)
    assert said == (
        f"no kubeconfig here reaches the fleet ({world.kubeconfig}: no such kubeconfig file): "
        f"put the fleet's kubeconfig at {world.kubeconfig} or give --kubeconfig, then run "
        "nodeau join again; nothing was run or written"
    )
    assert world.steps == []


def test_dry_run_checks_the_kubeconfig_and_the_pin_then_runs_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    assert world.join(dry_run=True) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "node-join step (not run: --dry-run): " + " ".join(STEP),
        f"dry run: {world.kubeconfig} reaches the cluster and its CA matches the pin; nothing "
        "was run or written (without --dry-run, nodeau join joins this machine)",
    ]
    assert "registered" not in out
    assert not world.plane_file.exists() and world.steps == []
    assert world.cluster.reports.read().reports == ()
    # and a dry run meets the same checks as a join
    assert "is not the CA of the cluster" in refused(world, capsys, pin=OTHER_PIN, dry_run=True)


def test_a_report_the_cluster_cannot_take_leaves_the_machine_registered_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)

    def refuses(reports: MachineReports) -> str:
        raise ClusterUnreachable("cannot publish the report: the cluster does not answer")

    machine = world.machine()
    here = ThisMachine(
        platform=machine.platform,
        home=machine.home,
        machine=machine.machine,
        kubeadm=machine.kubeadm,
        run_step=machine.run_step,
        open_fleet=machine.open_fleet,
        publish_report=refuses,
    )
    ask = JoinAsk(
        server="https://10.0.0.1:6443",
        token=TOKEN,
        ca_cert_hash=PIN,
        kubeconfig=world.kubeconfig,
        dry_run=False,
    )
    assert join_fleet(ask, here) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("registered: ")
    assert out[2] == (
        "agent report: not published (cannot publish the report: the cluster does not "
        "answer); the agent reports when it starts"
    )
    assert world.plane_file.exists()
