"""A person's marks on the machines: drained, upgrading, and the scheduling policy, each
change with the sentence that says it moves nothing that runs.

Why it is so: docs/adr/decisions/domain.md (scheduling.py).
"""

from __future__ import annotations

from attrs import evolve, field, frozen

from nodeau.domain.placement import Policy, SchedulingSettings


@frozen(kw_only=True)
class SettingsChange:
    """A new scheduling setting, and the sentence that says what it touches."""

    settings: SchedulingSettings
    sentence: str


def change_fleet_policy(
    settings: SchedulingSettings, policy: Policy, running: int
) -> SettingsChange:
    """Set the fleet-wide policy; it applies to new placements only."""
    return SettingsChange(
        settings=evolve(settings, fleet_policy=policy),
        sentence=(
            f"fleet policy is now {policy.value}; it applies to new placements only, "
            f"{running} running workload(s) stay where they are"
        ),
    )


def set_machine_policy(
    settings: SchedulingSettings, machine: str, policy: Policy | None, running: int
) -> SettingsChange:
    """Override the policy on one machine (None removes the override)."""
    kept = tuple((m, p) for m, p in settings.overrides if m != machine)
    overrides = kept if policy is None else tuple(sorted((*kept, (machine, policy))))
    now = settings.fleet_policy if policy is None else policy
    origin = "the fleet policy" if policy is None else "its own override"
    return SettingsChange(
        settings=evolve(settings, overrides=overrides),
        sentence=(
            f"{machine} now uses {now.value} ({origin}); it applies to new placements only, "
            f"{running} running workload(s) there stay where they are"
        ),
    )


@frozen(kw_only=True)
class DrainChange:
    """The drained set after a drain or undrain, and what it did (nothing to workloads)."""

    drained: frozenset[str]
    sentence: str


def drain(drained: frozenset[str], machine: str, running: int) -> DrainChange:
    """Stop choosing a machine for anything new; nothing on it is disturbed."""
    return DrainChange(
        drained=drained | {machine},
        sentence=(
            f"{machine} is drained: nothing new is placed there; its {running} running "
            "workload(s) are not stopped, moved or restarted"
        ),
    )


def undrain(drained: frozenset[str], machine: str) -> DrainChange:
    """Make a machine a candidate again; nothing moves back to it."""
    return DrainChange(
        drained=drained - {machine},
        sentence=f"{machine} takes new placements again; nothing is moved back to it",
    )


@frozen(kw_only=True)
class UpgradeChange:
    """The machines marked upgrading after a mark or its clearing, and what it did (nothing
    to workloads)."""

    upgrading: frozenset[str]
    sentence: str


def mark_upgrading(
    upgrading: frozenset[str], machine: str, running: int, *, alone: bool
) -> UpgradeChange:
    """Mark a machine upgrading: on a fleet nothing on it moves and nothing new is placed
    there while the mark holds; on one machine (``alone``) nothing moves anyway. Marking
    stops, moves and restarts nothing."""
    kept = f"its {running} running workload(s) are not stopped, moved or restarted"
    if alone:
        sentence = f"{machine} is marked upgrading; on one machine nothing moves anyway, and {kept}"
    else:
        sentence = (
            f"{machine} is marked upgrading: nothing on it moves and nothing new is placed there "
            f"until nodeau fleet upgrade --node {machine} --done; {kept}"
        )
    return UpgradeChange(upgrading=upgrading | {machine}, sentence=sentence)


def clear_upgrading(upgrading: frozenset[str], machine: str, *, alone: bool) -> UpgradeChange:
    """Take the upgrading mark off a machine; nothing moves because of it."""
    if machine not in upgrading:
        sentence = f"{machine} was not marked upgrading; nothing changed"
    elif alone:
        sentence = f"{machine} is no longer marked upgrading; on one machine nothing moves anyway"
    else:
        sentence = (
            f"{machine} is no longer marked upgrading: it takes new placements again, and its "
            "workloads' recovery choices apply again if it stops answering; nothing moves now"
        )
    return UpgradeChange(upgrading=upgrading - {machine}, sentence=sentence)


@frozen(kw_only=True)
class Marks:
    """A person's marks on the fleet: drained and upgrading machines and the scheduling
    settings."""

    drained: frozenset[str] = frozenset()
    settings: SchedulingSettings = field(factory=SchedulingSettings)
    upgrading: frozenset[str] = frozenset()
