"""``MachineCommands`` on a fleet on Kubernetes: Nodes, their agents' reports and marks.

The controller's health records say whether a machine answers; the marks are the Nodes'
own (``FleetMarks``), written only after the domain has said what the change does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from attrs import frozen

from nodeau.apps.machines.commands import (
    FLEET_POLICY,
    OWN_POLICY,
    FleetListing,
    MachineView,
    UpgradeMark,
    gpu_views,
)
from nodeau.domain import marking
from nodeau.domain.fleet_reports import MachineReport, MarkedFleet
from nodeau.domain.health import MachineHealth
from nodeau.domain.placement import Policy
from nodeau.domain.reservations import Ledger
from nodeau.ports.cluster import (
    FleetMarks,
    HealthRecords,
    MachineReports,
    ReservationLedger,
    UnknownMachine,
)

NOT_ASSESSED = "not yet assessed"


def machine_view(
    name: str,
    *,
    report: MachineReport | None,
    assessed: MachineHealth | None,
    ledger: Ledger,
    drained: bool,
    upgrading: bool,
    control_plane: bool,
    policy: str,
    own_policy: bool,
) -> MachineView:
    """One Node as ``fleet list`` shows it."""
    return MachineView(
        machine=name,
        health=NOT_ASSESSED if assessed is None else assessed.state.value,
        health_sentence=None if assessed is None else assessed.sentence,
        drained=drained,
        upgrading=upgrading,
        control_plane=control_plane,
        policy=policy,
        policy_from=OWN_POLICY if own_policy else FLEET_POLICY,
        simulated=None if report is None else report.reading.simulated,
        reported_at=None if report is None else report.at,
        gpus=gpu_views(() if report is None else report.reading.gpus, ledger),
    )


@frozen(kw_only=True)
class FleetMachines:
    """``MachineCommands`` where the plane is a fleet, described as ``plane``."""

    _plane: str
    _marks: FleetMarks
    _reports: MachineReports
    _health: HealthRecords
    _ledger: ReservationLedger
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def listing(self) -> FleetListing:
        marks = self._marks.read()
        health = dict(self._health.read())
        reports = {r.machine: r for r in self._reports.read().reports}
        ledger = self._ledger.read()
        overrides = dict(marks.settings.overrides)
        return FleetListing(
            plane=self._plane,
            fleet_policy=marks.settings.fleet_policy.value,
            machines=tuple(
                machine_view(
                    name,
                    report=reports.get(name),
                    assessed=health.get(name),
                    ledger=ledger,
                    drained=name in marks.drained,
                    upgrading=name in marks.upgrading,
                    control_plane=name in marks.control_plane,
                    policy=marks.settings.policy_for(name).value,
                    own_policy=name in overrides,
                )
                for name in marks.nodes
            ),
        )

    def drain(self, node: str) -> str:
        self._permit("drain")
        marks = self._marked(node)
        running = len(self._ledger.read().on_machine(node))
        change = marking.drain(marks.drained, node, running)
        self._marks.write_drained(node, self._clock())
        return change.sentence

    def undrain(self, node: str) -> str:
        self._permit("drain")
        change = marking.undrain(self._marked(node).drained, node)
        self._marks.write_drained(node, None)
        return change.sentence

    def set_policy(self, policy: Policy, node: str | None) -> str:
        self._permit("set-policy")
        ledger = self._ledger.read()
        if node is None:
            settings = self._marks.read().settings
            change = marking.change_fleet_policy(settings, policy, len(ledger.reservations))
        else:
            settings = self._marked(node).settings
            running = len(ledger.on_machine(node))
            change = marking.set_machine_policy(settings, node, policy, running)
        self._marks.write_policy(policy, node)
        return change.sentence

    def mark_upgrading(self, node: str, *, upgrading: bool) -> UpgradeMark:
        self._permit("mark-upgrading")
        marked = self._marked(node).upgrading
        if upgrading:
            running = len(self._ledger.read().on_machine(node))
            change = marking.mark_upgrading(marked, node, running, alone=False)
        else:
            change = marking.clear_upgrading(marked, node, alone=False)
        self._marks.write_upgrading(node, upgrading)
        return UpgradeMark(
            plane=self._plane, machine=node, upgrading=upgrading, sentence=change.sentence
        )

    def _marked(self, node: str) -> MarkedFleet:
        marks = self._marks.read()
        if node not in marks.nodes:
            raise UnknownMachine.named(node)
        return marks
