"""A mark on a machine (a policy, a drain) changes new placements only, and says so."""

from __future__ import annotations

from nodeau.domain.marking import change_fleet_policy, drain, set_machine_policy, undrain
from nodeau.domain.placement import Policy, SchedulingSettings


def test_changing_the_fleet_policy_touches_new_placements_only() -> None:
    change = change_fleet_policy(SchedulingSettings(), Policy.SPREAD, running=3)
    assert change.settings == SchedulingSettings(fleet_policy=Policy.SPREAD)
    assert change.sentence == (
        "fleet policy is now spread; it applies to new placements only, "
        "3 running workload(s) stay where they are"
    )


def test_machine_override_set_and_removed() -> None:
    base = SchedulingSettings(fleet_policy=Policy.PACK, overrides=(("zeta", Policy.PACK),))
    on = set_machine_policy(base, "attic", Policy.SPREAD, running=1)
    assert on.settings.overrides == (("attic", Policy.SPREAD), ("zeta", Policy.PACK))
    assert on.sentence == (
        "attic now uses spread (its own override); it applies to new placements only, "
        "1 running workload(s) there stay where they are"
    )
    off = set_machine_policy(on.settings, "attic", None, running=0)
    assert off.settings.overrides == (("zeta", Policy.PACK),)
    assert off.sentence.startswith("attic now uses pack (the fleet policy)")


def test_drain_and_undrain_are_marks_only() -> None:
    d = drain(frozenset({"shed"}), "garage", running=2)
    assert d.drained == frozenset({"shed", "garage"})
    assert d.sentence == (
        "garage is drained: nothing new is placed there; its 2 running workload(s) are not "
        "stopped, moved or restarted"
    )
    u = undrain(d.drained, "garage")
    assert u.drained == frozenset({"shed"})
    assert u.sentence == "garage takes new placements again; nothing is moved back to it"
