"""Recovery simulated over the domain and fake cluster: fleets of 20 to 50 and of 1,000 machines.

After every controller pass docs/recovery's promises (the numbered functions below) are held
against the world's own truth: outages, flaps, upgrades, late passes and choices set again
(tests/support/fakes/recovery_world.py). A broken promise fails its seed with the world's trace.
"""

from __future__ import annotations

import functools
import random
import traceback
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from textwrap import shorten

import pytest
from attrs import define, field, frozen

from nodeau.domain.fleet_reports import MachineArtifact
from nodeau.domain.health import Health, MachineHealth
from nodeau.domain.lifecycle import ServerPhase
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import (
    HeldReason,
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
    holds_gpu,
)
from nodeau.ports.cluster import ServerPod
from nodeau.ports.state import WorkloadRecord
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.controller_fleet import SMALL
from tests.support.fakes.fake_cluster import FakeCluster, verified
from tests.support.fakes.recovery_world import SERVICE, Shape, Spell, Tally, Weather, World

START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
TESTS = Path(__file__).resolve().parents[2]
ROOT = TESTS.parent
SMALL_SEEDS = range(30)
FAMILY_SEEDS = range(8)  # each family below: a late controller, choices set again
BIG_SEEDS = (1001, 1002)
SMALL_STEPS, BIG_STEPS = 120, 50  # 20 and 8 simulated minutes


class Broken(AssertionError):
    """A promise the simulation saw broken, and the workloads and machines it concerns."""

    def __init__(self, what: str, *names: str) -> None:
        super().__init__(what)
        self.names = names


def model_copy(machine: str) -> MachineArtifact:
    return verified(machine, SUMMARY, sha=SMALL, name="qwen", gib=4)


# -- the promises, each a named function over what the cluster holds after a pass ----------


def cards_held_once(
    ledger: Ledger,
    records: Mapping[str, WorkloadRecord],
    pods: Mapping[tuple[WorkloadKind, str], ServerPod],
    cards: Mapping[str, frozenset[str]],
) -> None:
    """1. One reservation per card and per workload, each the card its record names, on a
    card its machine has; every workload that holds a card has its reservation; one server
    per card."""
    on_card = Counter(r.gpu_uuid for r in ledger.reservations)
    for card, n in on_card.items():
        if n > 1:
            holders = [r.workload for r in ledger.reservations if r.gpu_uuid == card]
            raise Broken(f"card {card} held {n} times: {holders}", card, *holders)
    per_workload = Counter(r.workload for r in ledger.reservations)
    for name, n in per_workload.items():
        if n > 1:
            raise Broken(f"{name} holds {n} reservations", name)
    for r in ledger.reservations:
        rec = records.get(r.workload)
        if rec is None or not holds_gpu(rec.workload.state):
            raise Broken(
                f"{r.workload} holds {r.gpu_uuid} but its record holds no card", r.workload
            )
        w = rec.workload
        if (w.machine, w.gpu_uuid) != (r.machine, r.gpu_uuid) or r.gpu_uuid not in cards[r.machine]:
            raise Broken(
                f"{w.name}'s reservation names {r.machine}/{r.gpu_uuid}, its record "
                f"{w.machine}/{w.gpu_uuid}",
                w.name,
            )
    for name, rec in records.items():
        if holds_gpu(rec.workload.state) and name not in per_workload:
            raise Broken(f"{name} is {rec.workload.state.value} without a reservation", name)
    servers = Counter((p.machine, p.gpu_uuid) for p in pods.values())
    for (on, uuid), n in servers.items():
        if n > 1:
            raise Broken(f"{n} servers on {on}/{uuid}", str(on))


def routable_once(
    endpoints: Mapping[tuple[WorkloadKind, str], str],
    records: Mapping[str, WorkloadRecord],
    pods: Mapping[tuple[WorkloadKind, str], ServerPod],
    health: Mapping[str, MachineHealth],
) -> None:
    """2. Each server is its workload's one, on its record's machine (a server left where a
    recovery moved it from is gone by the end of the pass); an endpoint is shown only for a
    serving workload whose ready server is on its machine, and not while that machine is
    unreachable (fenced)."""
    servers = Counter(p.workload for p in pods.values())
    for pod in pods.values():
        rec = records.get(pod.workload)
        if servers[pod.workload] > 1 or rec is None or rec.workload.machine != pod.machine:
            where = None if rec is None else rec.workload.machine
            raise Broken(
                f"a server of {pod.workload} on {pod.machine}, its record on {where}",
                pod.workload,
                str(pod.machine),
            )
    for (kind, name), endpoint in endpoints.items():
        if not endpoint:
            continue
        rec = records.get(name)
        server = pods.get((kind, name))
        if rec is None or server is None:
            raise Broken(f"{name} shows {endpoint} without a record or server", name)
        w = rec.workload
        fenced = health[w.machine].state is Health.UNREACHABLE
        ready = server.phase is ServerPhase.READY and server.endpoint == endpoint
        if fenced or w.state is not WorkloadState.SERVING or not ready:
            moved_from = () if w.last_recovery is None else (w.last_recovery.from_machine,)
            raise Broken(
                f"{name} shows an endpoint while {w.state.value} on {w.machine} "
                f"({health[w.machine].state.value}), its server {server.phase.value} on "
                f"{server.machine}",
                name,
                w.machine,
                *moved_from,
            )


def shown_endpoints(cluster: FakeCluster) -> dict[tuple[WorkloadKind, str], str]:
    """Each object's endpoint as its status shows it (``WorkloadObject.endpoint``), read
    without building every object's view."""
    return {
        key: str(held.status.get("endpoint") or "") for key, held in cluster.objects.stored.items()
    }


def fleet_alarm_on(health: Mapping[str, MachineHealth]) -> bool:
    """More than half of the machines (and at least two) unreachable at once."""
    quiet = sum(h.state is Health.UNREACHABLE for h in health.values())
    return quiet >= 2 and quiet > len(health) / 2


def move_justified(
    world: World,
    before: Workload,
    after: Workload,
    health: Mapping[str, MachineHealth],
) -> None:
    """3 and 4. A workload's machine changed in this pass: it is one recovery of an automatic
    service, off a machine quiet by the truth for its whole delay, onto a candidate."""
    name, now = after.name, world.now
    source, target = before.machine, after.machine
    ask = world.asks[name]
    move = after.last_recovery
    said = f"{name} moved {source} -> {target}"
    if ask.kind is not SERVICE or ask.recovery is not RecoveryMode.AUTOMATIC:
        raise Broken(f"{said}, but it is a {ask.kind.value} set to {ask.recovery.value}", name)
    quiet_since = world.machines[source].quiet_since()
    if quiet_since + ask.recovery_after > now:
        raise Broken(
            f"{said} at t={world.seconds(now)}s before its delay: both of {source}'s signals "
            f"quiet since t={world.seconds(quiet_since)}s by the truth, delay "
            f"{ask.recovery_after.total_seconds():g}s",
            name,
            source,
        )
    if move is None or (move.from_machine, move.to_machine, move.at) != (source, target, now):
        raise Broken(f"{said} at t={world.seconds(now)}s; its last recovery says {move}", name)
    # the delay the record held when it moved: the one before, or the person's new one
    # when the watch brought it before this pass
    delays = (before.recovery_after, ask.recovery_after)
    if after.recoveries != before.recoveries + 1 or move.after not in delays:
        raise Broken(f"{said}: recorded as recovery {after.recoveries}, {move}", name)
    if move.unreachable_since < quiet_since:
        raise Broken(
            f"{said}: recorded unreachable since t={world.seconds(move.unreachable_since)}s, "
            f"earlier than the truth's t={world.seconds(quiet_since)}s",
            name,
            source,
        )
    nodes = world.cluster.nodes
    if nodes[source].upgrading or nodes[source].control_plane:
        raise Broken(f"{said} off a machine marked upgrading or the control plane", name, source)
    if nodes[target].drained or nodes[target].upgrading:
        raise Broken(f"{said} onto a drained or upgrading machine", name, target)
    if health[target].state in (Health.UNREACHABLE, Health.UPGRADING):
        raise Broken(f"{said} onto a machine {health[target].state.value}", name, target)


def spell_moved_nothing_early(world: World, machine: str, spell: Spell) -> None:
    """5. Every move off a machine during one spell off the network came from a spell
    longer than the grace plus that workload's delay (a flap that comes back sooner moves
    nothing)."""
    assert spell.quiet_since is not None and spell.back is not None
    unreachable = spell.back - spell.quiet_since
    for name, delay, at in spell.moves:
        if unreachable <= delay:
            raise Broken(
                f"{name} moved off {machine} at t={world.seconds(at)}s during a spell it was "
                f"unreachable for {unreachable.total_seconds():g}s, delay "
                f"{delay.total_seconds():g}s",
                name,
                machine,
            )


# -- following one world -------------------------------------------------------------------


@define
class Seen:
    """What the last pass left of one workload."""

    workload: Workload
    left: set[str] = field(factory=set)  # machines a recovery took it away from


class Watch:
    """Holds one world to the promises after every pass, and tallies the paths it took."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.seen = {r.workload.name: Seen(r.workload) for r in self._records().values()}

    def _records(self) -> dict[str, WorkloadRecord]:
        snapshot = self.world.cluster.store.snapshot()
        return {r.workload.name: r for r in snapshot.workloads}

    def check(self) -> None:
        world, cluster = self.world, self.world.cluster
        if world.failed_passes:
            raise Broken(f"a controller pass failed: {world.failed_passes[0]}")
        records = self._records()
        health = cluster.health.read()
        pods = cluster.pods.pods
        cards_held_once(cluster.ledger.read(), records, pods, world.cards)
        routable_once(shown_endpoints(cluster), records, pods, health)
        alarm = fleet_alarm_on(health)
        tally = world.tally
        tally.alarm_passes += alarm
        on_machine: dict[str, list[Workload]] = {}
        for name, rec in records.items():
            w, seen = rec.workload, self.seen.get(name)
            on_machine.setdefault(w.machine, []).append(w)
            if seen is None:
                self.seen[name] = Seen(w)
                continue
            if w.held_reason is not None and w.held_reason is not seen.workload.held_reason:
                tally.held[w.held_reason.value] += 1
            if w.state is WorkloadState.HELD and health[w.machine].state not in (
                Health.UNREACHABLE,
                Health.UPGRADING,
            ):
                raise Broken(f"{name} held on {w.machine}, which answers", name, w.machine)
            if w.machine != seen.workload.machine:
                if alarm:
                    raise Broken(f"{name} moved while most of the fleet is unreachable", name)
                move_justified(world, seen.workload, w, health)
                tally.moves += 1
                tally.moves_onto_a_former_machine += w.machine in seen.left
                seen.left.add(seen.workload.machine)
                spell = world.machines[seen.workload.machine].spell
                if spell is not None:
                    spell.moves.append((name, world.asks[name].recovery_after, world.now))
                world.say(f"checked: {name} moved {seen.workload.machine} -> {w.machine}")
            elif w.recoveries != seen.workload.recoveries:
                raise Broken(f"{name}'s recoveries changed without a move", name)
            seen.workload = w
        if alarm and any(
            s.workload.held_reason is HeldReason.FLEET_QUIET for s in self.seen.values()
        ):
            tally.alarm_passes_holding += 1
        self._follow_spells(health, on_machine)

    def _follow_spells(
        self, health: Mapping[str, MachineHealth], on_machine: Mapping[str, list[Workload]]
    ) -> None:
        world = self.world
        for m in world.machines.values():
            spell = m.spell
            if spell is None or health[m.name].state is not Health.UNREACHABLE:
                continue
            if not spell.saw_unreachable and m.name != world.control_plane:
                spell.watched = {
                    w.name: w.recovery_after
                    for w in on_machine.get(m.name, [])
                    if w.recovery_mode is RecoveryMode.AUTOMATIC and holds_gpu(w.state)
                }
            spell.saw_unreachable = True
        ended, world.ended = world.ended, []
        for machine, spell in ended:
            spell_moved_nothing_early(world, machine, spell)
            assert spell.quiet_since is not None and spell.back is not None
            unreachable = spell.back - spell.quiet_since
            if (
                not spell.split
                and spell.saw_unreachable
                and spell.watched
                and not spell.moves
                and all(delay > unreachable for delay in spell.watched.values())
            ):
                world.tally.flaps_without_move += 1


# -- worlds ----------------------------------------------------------------------------------


@frozen(kw_only=True)
class Outcome:
    tally: Tally
    failure: str | None


def run_world(seed: int, shape: Shape, weather: Weather, steps: int) -> Outcome:
    """One world for ``steps`` passes, checked after each; the first broken promise ends it."""
    world = World(seed, shape, weather, start=START, model_copy=model_copy)
    try:
        watch = Watch(world)
        for _ in range(steps):
            if world.step():
                watch.check()
    except Broken as broken:
        return Outcome(tally=world.tally, failure=failure(seed, world, str(broken), broken.names))
    except Exception as exc:  # a domain invariant raised inside the controller's pass
        return Outcome(tally=world.tally, failure=failure(seed, world, raised(exc), ()))
    return Outcome(tally=world.tally, failure=None)


def raised(exc: Exception) -> str:
    """The exception and the product functions it came through, innermost first."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if Path(f.filename).is_relative_to(ROOT)
        and not Path(f.filename).is_relative_to(TESTS)
        and "site-packages" not in f.filename
    ]
    where = " <- ".join(
        f"{Path(f.filename).relative_to(ROOT)}:{f.name}" for f in reversed(frames[-5:])
    )
    return f"{exc!r}, raised in {where}"


def failure(seed: int, world: World, what: str, names: tuple[str, ...]) -> str:
    """The seed, the moment, what broke, and the world's trace for the names involved."""
    lines = [
        line
        for line in world.trace
        if not names or "the controller" in line or any(n in line for n in names)
    ]
    trace = "\n  ".join(shorten(line, 150, placeholder=" …") for line in lines[-25:])
    return f"seed {seed}, t={world.seconds(world.now)}s: {what}\n  {trace}"


@functools.cache
def small_world(seed: int) -> Outcome:
    """20 to 50 machines, a fleet from over half to full; every sixth seed a network split,
    every fourth the control-plane machine going away."""
    pick = random.Random(-seed)
    shape = Shape(machines=pick.randint(20, 50), services=pick.uniform(0.6, 1.0))
    split = pick.randint(20, 60) if seed % 6 == 5 else None
    away = pick.randint(5, 40) if seed % 4 == 1 else None
    weather = Weather(outage=pick.uniform(0.001, 0.004), split_at=split, control_plane_away_at=away)
    return run_world(seed, shape, weather, SMALL_STEPS)


@functools.cache
def late_controller_world(seed: int) -> Outcome:
    """A small fleet whose controller's passes often come late (gaps of 20 to 60 s: not a
    stall by the loop's measure, which is over 60 s) and that sometimes stalls for minutes;
    shorter delays, so a late first sight of an unreachable machine can find it due."""
    pick = random.Random(-seed)
    shape = Shape(machines=pick.randint(20, 30), services=pick.uniform(0.5, 0.9), delays=(30, 120))
    weather = Weather(outage=0.006, late=0.3, stall=0.02)
    return run_world(seed, shape, weather, SMALL_STEPS)


@functools.cache
def choice_world(seed: int) -> Outcome:
    """A small fleet where people often set a service's recovery again, mostly for one that
    ``nodeau ps`` shows held or recovering; the watch brings each change to the controller
    before its next pass. Servers take 20 to 90 s to load."""
    pick = random.Random(-seed)
    shape = Shape(machines=pick.randint(20, 30), services=pick.uniform(0.5, 0.9), load=(20, 90))
    weather = Weather(outage=0.004, choice_change=0.3, react=0.8)
    return run_world(seed, shape, weather, SMALL_STEPS)


@functools.cache
def late_watch_world(seed: int) -> Outcome:
    """A small fleet where people often set a service's recovery again, mostly for one held
    or recovering, and the watch event that brings the change comes after the next pass
    has begun as often as not (the loop allows a missed event to cost one resync)."""
    pick = random.Random(-seed)
    shape = Shape(machines=pick.randint(20, 30), services=pick.uniform(0.5, 0.9))
    weather = Weather(
        outage=0.004,
        choice_change=0.5,
        watch_delivers=0.5,
        react=1.0,
        react_to_recovering=False,
    )
    return run_world(seed, shape, weather, SMALL_STEPS)


@functools.cache
def big_world(seed: int) -> Outcome:
    """1,000 machines, a few hundred services, a rack that loses power early on.

    Delays are kept to three minutes here: every pass plans each automatic service on an
    unreachable machine over the whole fleet, which costs about 0.1 s at this size."""
    shape = Shape(machines=1000, services=0.8, batch_jobs=5, delays=(30, 180), reporting_first=200)
    weather = Weather(outage=0.0004, one_signal=0.001, upgrade=0.0002, drain_toggle=0.2, rack_at=3)
    return run_world(seed, shape, weather, BIG_STEPS)


def held_to_its_promises(outcome: Outcome) -> None:
    """Fail with the seed and the short trace when the world saw a promise broken."""
    if outcome.failure is not None:
        pytest.fail(outcome.failure, pytrace=False)


@pytest.mark.parametrize("seed", SMALL_SEEDS)
def test_recovery_keeps_its_promises_in_a_small_fleet(seed: int) -> None:
    outcome = small_world(seed)
    held_to_its_promises(outcome)


@pytest.mark.parametrize("seed", BIG_SEEDS)
def test_recovery_keeps_its_promises_in_a_fleet_of_a_thousand_machines(seed: int) -> None:
    outcome = big_world(seed)
    held_to_its_promises(outcome)
    assert outcome.tally.moves > 0  # something moved in a fleet this size


@pytest.mark.parametrize("seed", FAMILY_SEEDS)
def test_recovery_keeps_its_promises_when_the_controller_runs_late(seed: int) -> None:
    outcome = late_controller_world(seed)
    held_to_its_promises(outcome)


@pytest.mark.parametrize("seed", FAMILY_SEEDS)
def test_recovery_keeps_its_promises_when_people_set_recovery_again(seed: int) -> None:
    outcome = choice_world(seed)
    held_to_its_promises(outcome)


@pytest.mark.parametrize("seed", FAMILY_SEEDS)
def test_recovery_keeps_its_promises_when_a_new_choice_reaches_the_controller_late(
    seed: int,
) -> None:
    outcome = late_watch_world(seed)
    held_to_its_promises(outcome)


def test_the_simulation_took_every_path() -> None:
    """A simulation where nothing moves proves nothing: recoveries, holds for capacity, the
    fleet-wide alarm, flaps that moved nothing, one quiet signal and upgrades all happened."""
    worlds = [small_world(s) for s in SMALL_SEEDS] + [big_world(s) for s in BIG_SEEDS]
    tally = sum((o.tally for o in worlds), Tally())
    assert tally.moves >= 50, tally
    assert tally.held[HeldReason.CAPACITY.value] > 0, tally
    assert tally.held[HeldReason.WAITING_FOR_DELAY.value] > 0, tally
    assert tally.held[HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF.value] > 0, tally
    assert tally.held[HeldReason.ON_CONTROL_PLANE_MACHINE.value] > 0, tally
    assert tally.held[HeldReason.BATCH_JOB.value] > 0, tally
    assert tally.alarm_passes_holding > 0, tally
    assert tally.flaps_without_move > 0, tally
    assert tally.one_signal_spells > 0 and tally.upgrades > 0, tally
    late = sum((late_controller_world(s).tally for s in FAMILY_SEEDS), Tally())
    assert late.passes < late.steps, late  # passes did come late
    chosen = sum((choice_world(s).tally + late_watch_world(s).tally for s in FAMILY_SEEDS), Tally())
    assert chosen.choices > 0 and chosen.moves > 0, chosen
