"""``MachineCommands`` on one machine: its cards from the inventory, its marks in SQLite.

A fleet of one: this machine is the only one, it reports while the command runs, and it is
its own control plane.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from attrs import evolve, frozen

from nodeau.apps.machines.commands import (
    FLEET_POLICY,
    OWN_POLICY,
    FleetListing,
    MachineView,
    UpgradeMark,
    gpu_views,
)
from nodeau.domain import marking
from nodeau.domain.placement import Policy
from nodeau.domain.reservations import Ledger
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.marks import SchedulingMarks
from nodeau.ports.state import StateError

HEALTH = "reporting"  # a fleet of one is the machine answering this command


class MarkParts(Protocol):
    """The adapters these commands use, each built when first asked for."""

    @property
    def inventory(self) -> GpuInventory: ...

    @property
    def marks(self) -> SchedulingMarks: ...


@frozen(kw_only=True)
class ThisMachineMarks:
    """``MachineCommands`` where the plane is this machine, called ``machine``."""

    _plane: str
    _machine: str
    _parts: MarkParts
    _ledger: Callable[[], Ledger]
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def listing(self) -> FleetListing:
        reading = self._parts.inventory.read()
        marks = self._parts.marks.read()
        machine = reading.machine
        view = MachineView(
            machine=machine,
            health=HEALTH,
            health_sentence=None,
            drained=machine in marks.drained,
            upgrading=machine in marks.upgrading,
            control_plane=True,
            policy=marks.settings.policy_for(machine).value,
            policy_from=OWN_POLICY if machine in dict(marks.settings.overrides) else FLEET_POLICY,
            simulated=reading.simulated,
            reported_at=self._clock(),
            gpus=gpu_views(reading.gpus, self._ledger()),
        )
        return FleetListing(
            plane=self._plane, fleet_policy=marks.settings.fleet_policy.value, machines=(view,)
        )

    def drain(self, node: str) -> str:
        self._permit("drain")
        self._known(node)
        running = len(self._ledger().on_machine(node))
        change = marking.drain(self._parts.marks.read().drained, node, running)
        self._parts.marks.change(lambda m: evolve(m, drained=m.drained | {node}))
        return change.sentence

    def undrain(self, node: str) -> str:
        self._permit("drain")
        self._known(node)
        change = marking.undrain(self._parts.marks.read().drained, node)
        self._parts.marks.change(lambda m: evolve(m, drained=m.drained - {node}))
        return change.sentence

    def mark_upgrading(self, node: str, *, upgrading: bool) -> UpgradeMark:
        self._permit("mark-upgrading")
        self._known(node)
        marked = self._parts.marks.read().upgrading
        if upgrading:
            running = len(self._ledger().on_machine(node))
            change = marking.mark_upgrading(marked, node, running, alone=True)
            self._parts.marks.change(lambda m: evolve(m, upgrading=m.upgrading | {node}))
        else:
            change = marking.clear_upgrading(marked, node, alone=True)
            self._parts.marks.change(lambda m: evolve(m, upgrading=m.upgrading - {node}))
        return UpgradeMark(
            plane=self._plane, machine=node, upgrading=upgrading, sentence=change.sentence
        )

    def set_policy(self, policy: Policy, node: str | None) -> str:
        self._permit("set-policy")
        ledger = self._ledger()
        settings = self._parts.marks.read().settings
        if node is None:
            change = marking.change_fleet_policy(settings, policy, len(ledger.reservations))
        else:
            self._known(node)
            running = len(ledger.on_machine(node))
            change = marking.set_machine_policy(settings, node, policy, running)
        self._parts.marks.change(lambda m: evolve(m, settings=change.settings))
        return change.sentence

    def _known(self, node: str) -> None:
        if node != self._machine:
            raise StateError(
                f"no machine called {node!r} on this plane; this machine is "
                f"{self._machine} (nodeau fleet list)"
            )
