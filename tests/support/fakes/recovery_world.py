"""A simulated fleet for recovery, under one controller over the contract-checked ``FakeCluster``.

Machines go off the network, flap, lose one signal, get upgraded and come back. ``World.step`` is
ten seconds (the default resync). The world keeps its own truth apart from the controller's view,
so a test can hold the controller's moves against what really happened.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable
from datetime import datetime, timedelta

from attrs import define, evolve, field, fields, frozen

from nodeau.apps.controller.loop import Controller
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.fleet_reports import MachineArtifact, MachineReport
from nodeau.domain.health import HealthPolicy
from nodeau.domain.lifecycle import ServerPhase
from nodeau.domain.workloads import HeldReason, RecoveryMode, WorkloadKind, WorkloadState
from tests.support.clock import Clock
from tests.support.fakes.fake_cluster import FakeCluster, machine_report

STEP = timedelta(seconds=10)  # the controller's default resync
GRACE = HealthPolicy()  # the graces the controller assesses with (node 40 s, agent 30 s)
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
# lines of the controller's log that say a pass failed: the simulation never causes one
FAILED_PASS = ("not assessed this time", "not reconciled this time", "not listed this time")


@frozen(kw_only=True)
class Weather:
    """How often machines misbehave, per machine and per step."""

    outage: float = 0.002  # it goes off the network (both signals quiet)
    one_signal: float = 0.002  # its kubelet or its agent alone goes quiet
    upgrade: float = 0.0003  # a fleet upgrade marks it and restarts it
    drain_toggle: float = 0.02  # per step: one machine is drained, or one undrained
    split_at: int | None = None  # the step a network split takes most of the fleet away
    rack_at: int | None = None  # the step a rack of machines holding services goes away
    rack: int = 2  # how many machines that rack holds
    control_plane_away_at: int | None = None  # the step the control-plane machine goes away
    late: float = 0.0  # per pass: the controller's next pass comes 20 to 60 s late
    stall: float = 0.0  # per pass: the controller stalls for 90 to 180 s
    choice_change: float = 0.0  # per step: a person sets one service's recovery again
    watch_delivers: float = 1.0  # the watch brings that change before the next pass
    react: float = 0.0  # share of those made to a service held or recovering (nodeau ps)
    react_to_recovering: bool = True  # whether a recovering service draws such a change


@frozen(kw_only=True)
class Shape:
    """What the fleet holds at the start."""

    machines: int
    services: float  # services per free card that holds a copy of the model
    never: float = 0.25  # share of services whose recovery is never
    batch_jobs: int = 2
    without_copy: float = 0.1  # share of machines with no verified copy of the model
    drained: float = 0.05
    delays: tuple[int, int] = (30, 600)  # an automatic service's delay, in seconds
    load: tuple[int, int] = (0, 40)  # seconds a server takes to load its model
    # machines whose agents have reported when the services are first placed (the rest
    # join right after); None: all of them
    reporting_first: int | None = None


@define
class Spell:
    """One spell off the network, as the world knows it and as a test follows it."""

    split: bool = False  # it was cut off by a network split
    saw_unreachable: bool = False  # the controller assessed it unreachable during the spell
    watched: dict[str, timedelta] = field(factory=dict)  # automatic services on it: delays
    moves: list[tuple[str, timedelta, datetime]] = field(factory=list)
    quiet_since: datetime | None = None  # set when it ends: the truth's unreachable moment
    back: datetime | None = None


@define
class Machine:
    """What really happens to one machine."""

    name: str
    node_seen: datetime
    report_seen: datetime
    off_until: datetime | None = None  # off the network until then
    kubelet_quiet_until: datetime | None = None
    agent_quiet_until: datetime | None = None
    upgrade_until: datetime | None = None
    lifted_at: datetime | None = None  # the last time an upgrade mark left it
    flaps_left: int = 0
    next_off: datetime | None = None
    spell: Spell | None = None

    def answers(self) -> bool:
        return self.off_until is None

    def kubelet_answers(self) -> bool:
        return self.off_until is None and self.kubelet_quiet_until is None

    def quiet_since(self) -> datetime:
        """The moment both its signals had gone quiet by the truth (the later of the two), or
        the moment an upgrade mark left it if that is later: quiet time under the mark is
        not counted against a machine."""
        quiet = max(self.node_seen + GRACE.node_grace, self.report_seen + GRACE.agent_grace)
        return quiet if self.lifted_at is None else max(quiet, self.lifted_at)


@define
class Tally:
    """What happened in the worlds, to show that each path was taken."""

    worlds: int = 0
    steps: int = 0
    passes: int = 0
    choices: int = 0  # recovery choices a person set again
    outages: int = 0
    flaps: int = 0
    one_signal_spells: int = 0
    upgrades: int = 0
    splits: int = 0
    moves: int = 0
    moves_onto_a_former_machine: int = 0
    alarm_passes: int = 0  # passes with more than half of the fleet unreachable
    alarm_passes_holding: int = 0  # alarm passes that held a service that would have moved
    flaps_without_move: int = 0  # spells unreachable for less than every delay on it
    held: Counter[str] = field(factory=Counter)  # held reason: times a workload entered it

    def __add__(self, other: Tally) -> Tally:
        counts = {
            a.name: getattr(self, a.name) + getattr(other, a.name)
            for a in fields(Tally)
            if a.name != "held"
        }
        return Tally(**counts, held=self.held + other.held)


class World:
    """A fleet of machines, its services and batch jobs, its controller, and the truth."""

    def __init__(
        self,
        seed: int,
        shape: Shape,
        weather: Weather,
        *,
        start: datetime,
        model_copy: Callable[[str], MachineArtifact],
    ) -> None:
        self.rng = random.Random(seed)
        self.weather = weather
        self.clock = Clock(start)
        self.start = start
        self.cluster = FakeCluster(self.clock)
        self.trace: deque[str] = deque(maxlen=2000)
        self.failed_passes: list[str] = []
        self.tally = Tally(worlds=1)
        self.machines: dict[str, Machine] = {}
        self.cards: dict[str, frozenset[str]] = {}
        self.control_plane = "m0000"
        self.ended: list[tuple[str, Spell]] = []  # spells ended since the last check
        self.steps = 0
        self.next_pass = 1  # the step the controller's next pass runs at
        self.loaded_at: dict[tuple[str, str], datetime] = {}  # (workload, machine): ready at
        self.shape = shape
        copies = 0
        joining: list[MachineReport] = []
        for i in range(shape.machines):
            name = f"m{i:04d}"
            cards = self.rng.choice((1, 1, 2))
            self.cluster.add_node(name, control_plane=name == self.control_plane)
            self.cluster.nodes[name].heartbeat_at = start
            without = self.rng.random() < shape.without_copy and name != self.control_plane
            held = () if without else (model_copy(name),)
            report = machine_report(name, cards, *held, at=start)
            if shape.reporting_first is not None and i >= shape.reporting_first:
                joining.append(report)
            else:
                self.cluster.reports.publish(report)
                copies += cards if held else 0
            self.cards[name] = frozenset(g.gpu.uuid for g in report.reading.gpus)
            self.machines[name] = Machine(name=name, node_seen=start, report_seen=start)
        self.asks: dict[str, WorkloadAsk] = {}
        for i in range(max(1, round(copies * shape.services)) - shape.batch_jobs):
            never = self.rng.random() < shape.never
            delay = timedelta(seconds=self.rng.randint(*shape.delays))
            self._ask(
                WorkloadAsk(
                    kind=SERVICE,
                    name=f"svc-{i:04d}",
                    model="qwen",
                    recovery=RecoveryMode.NEVER if never else RecoveryMode.AUTOMATIC,
                    recovery_after=delay,
                )
            )
        self.ctl = Controller(
            self.cluster.controller_ports(),
            clock=self.clock,
            log=self._log,
        )
        self.ctl.resync()  # every service admitted and started; they serve once loaded
        for i in range(shape.batch_jobs):  # and the batch jobs, on the next pass
            self._ask(WorkloadAsk(kind=BATCH, name=f"job-{i:02d}", model="qwen"))
        for report in joining:
            self.cluster.reports.publish(report)
        for name in self.rng.sample(sorted(self.machines), round(shape.machines * shape.drained)):
            self.cluster.marks.write_drained(name, start)

    def _ask(self, ask: WorkloadAsk) -> None:
        self.asks[ask.name] = ask
        self.cluster.objects.create(ask)

    def _log(self, line: str) -> None:
        self.say(f"controller: {line}")
        if any(failed in line for failed in FAILED_PASS):
            self.failed_passes.append(line)

    def say(self, line: str) -> None:
        self.trace.append(f"t={self.seconds(self.clock.now)}s {line}")

    def seconds(self, at: datetime) -> int:
        return int((at - self.start).total_seconds())

    @property
    def now(self) -> datetime:
        return self.clock.now

    def step(self) -> bool:
        """Ten seconds: the weather, the renewals, the servers, and the controller's pass
        when one is due (every step, unless it runs late); whether a pass ran."""
        self.clock.now += STEP
        self.steps += 1
        self.tally.steps += 1
        self._weather()
        self._renew()
        self._servers_come_up()
        if self.steps < self.next_pass:
            return False
        self.ctl.resync()
        self.tally.passes += 1
        self.next_pass = self.steps + 1
        r = self.rng.random()
        if r < self.weather.stall:
            self.next_pass += self.rng.randint(9, 18)
            self.say(f"the controller stalls until t={self.seconds(self._pass_time())}s")
        elif r < self.weather.stall + self.weather.late:
            self.next_pass += self.rng.randint(1, 5)
            self.say(f"the controller's next pass is late, at t={self.seconds(self._pass_time())}s")
        return True

    def _pass_time(self) -> datetime:
        return self.now + (self.next_pass - self.steps) * STEP

    # -- the weather -----------------------------------------------------------------------

    def _weather(self) -> None:
        now = self.now
        for m in self.machines.values():
            self._spells_end(m, now)
        if self.weather.split_at == self.steps:
            self._split(now)
        if self.weather.rack_at == self.steps:
            self._rack(now)
        cp = self.machines[self.control_plane]
        if self.weather.control_plane_away_at == self.steps and cp.answers():
            span = timedelta(seconds=self.rng.randint(300, 900))
            self._off(cp, now, span, "(the control-plane machine) goes away")
        w = self.weather
        for m in self.machines.values():
            if not m.answers() or m.upgrade_until is not None or m.next_off is not None:
                continue
            r = self.rng.random()
            if r < w.outage:
                self._outage(m, now)
            elif r < w.outage + w.one_signal:
                self._one_signal(m, now)
            elif r < w.outage + w.one_signal + w.upgrade:
                self._upgrade(m, now)
        if self.rng.random() < w.drain_toggle:
            self._toggle_drain(now)
        if self.rng.random() < w.choice_change:
            self._choose_again()

    def _spells_end(self, m: Machine, now: datetime) -> None:
        if m.off_until is not None and now >= m.off_until:
            assert m.spell is not None
            m.spell.quiet_since, m.spell.back = m.quiet_since(), now
            self.ended.append((m.name, m.spell))
            m.off_until, m.spell = None, None
            self.say(f"{m.name} answers again")
            if m.flaps_left:
                m.next_off = now + timedelta(seconds=self.rng.choice((10, 10, 20, 30)))
        if m.next_off is not None and now >= m.next_off and m.answers():
            m.flaps_left -= 1
            m.next_off = None
            self._off(m, now, timedelta(seconds=self.rng.randint(15, 90)), "flaps off")
        if m.kubelet_quiet_until is not None and now >= m.kubelet_quiet_until:
            m.kubelet_quiet_until = None
        if m.agent_quiet_until is not None and now >= m.agent_quiet_until:
            m.agent_quiet_until = None
        if m.upgrade_until is not None and now >= m.upgrade_until:
            m.upgrade_until, m.lifted_at = None, now
            self.cluster.nodes[m.name].upgrading = False
            self.say(f"{m.name}: upgrade mark taken off")

    def _off(
        self, m: Machine, now: datetime, span: timedelta, why: str, split: bool = False
    ) -> None:
        m.off_until = now + span
        m.spell = Spell(split=split)
        self.tally.outages += 1
        self.say(f"{m.name} {why}: off the network until t={self.seconds(m.off_until)}s")

    def _outage(self, m: Machine, now: datetime) -> None:
        kind = self.rng.random()
        if kind < 0.3:  # a flapping machine: short spells off, short spells back
            self.tally.flaps += 1
            m.flaps_left = self.rng.randint(2, 6)
            m.next_off = now
            self._spells_end(m, now)
        elif kind < 0.55:  # a restart
            self._off(m, now, timedelta(seconds=self.rng.randint(10, 90)), "restarts")
        elif kind < 0.85:
            self._off(m, now, timedelta(seconds=self.rng.randint(90, 700)), "goes away")
        else:
            self._off(m, now, timedelta(seconds=self.rng.randint(700, 7200)), "is gone")

    def _one_signal(self, m: Machine, now: datetime) -> None:
        until = now + timedelta(seconds=self.rng.randint(30, 900))
        self.tally.one_signal_spells += 1
        if self.rng.random() < 0.5:
            m.kubelet_quiet_until = until
            self.say(f"{m.name}: its kubelet alone is quiet until t={self.seconds(until)}s")
        else:
            m.agent_quiet_until = until
            self.say(f"{m.name}: its agent alone is quiet until t={self.seconds(until)}s")

    def _upgrade(self, m: Machine, now: datetime) -> None:
        """Marked upgrading, restarted for a while; the mark leaves before or after it is back."""
        self.tally.upgrades += 1
        down = self.rng.randint(30, 400)
        m.upgrade_until = now + timedelta(seconds=max(10, down + self.rng.randint(-120, 60)))
        self.cluster.nodes[m.name].upgrading = True
        self.say(f"{m.name}: marked upgrading until t={self.seconds(m.upgrade_until)}s")
        self._off(m, now, timedelta(seconds=down), "restarts for its upgrade")

    def _split(self, now: datetime) -> None:
        """A network split: more than half of the fleet off the network at once, for longer
        than most delays, each coming back with a little jitter."""
        self.tally.splits += 1
        answering = [m for m in self.machines.values() if m.answers() and m.next_off is None]
        share = self.rng.uniform(0.6, 0.8)
        away = self.rng.sample(answering, min(len(answering), round(len(self.machines) * share)))
        span = self.rng.randint(300, 700)
        self.say(f"network split: {len(away)} of {len(self.machines)} machines go away")
        for m in away:
            jitter = timedelta(seconds=span + self.rng.randint(0, 60))
            self._off(m, now, jitter, "is cut off by the split", split=True)

    def _rack(self, now: datetime) -> None:
        """A rack loses power: a few machines holding automatic services go away for longer
        than most delays."""
        holding = sorted(
            {
                r.workload.machine
                for r in self.cluster.store.snapshot().workloads
                if r.workload.recovery_mode is RecoveryMode.AUTOMATIC
                and r.workload.machine != self.control_plane
                and self.machines[r.workload.machine].answers()
                and not self.cluster.nodes[r.workload.machine].upgrading
            }
        )
        for name in self.rng.sample(holding, min(self.weather.rack, len(holding))):
            span = timedelta(seconds=self.rng.randint(300, 900))
            self._off(self.machines[name], now, span, "loses power with its rack")

    def _choose_again(self) -> None:
        """A person sets a service's recovery again (``nodeau recovery set``): its spec
        changes; the watch brings the change to the controller at once, or late. A person
        who reacts to ``nodeau ps`` picks a service about to move (its held sentence says
        when), else one held or recovering."""
        services = sorted(n for n, a in self.asks.items() if a.kind is SERVICE)
        if self.rng.random() < self.weather.react:
            services = self._watched_by_people() or services
        name = self.rng.choice(services)
        never = self.rng.random() < 0.3
        ask = evolve(
            self.asks[name],
            recovery=RecoveryMode.NEVER if never else RecoveryMode.AUTOMATIC,
            recovery_after=timedelta(seconds=self.rng.randint(*self.shape.delays)),
        )
        self.asks[name] = ask
        self.tally.choices += 1
        stored = self.cluster.objects.stored[SERVICE, name]
        stored.ask = ask
        stored.version += 1
        stored.generation += 1
        after = int(ask.recovery_after.total_seconds())
        self.say(f"{name}: recovery set to {ask.recovery.value} (after {after}s)")
        if self.rng.random() < self.weather.watch_delivers:
            self.ctl.reconcile_all([(SERVICE, name)])
        else:
            self.say(f"{name}: the watch event for its new recovery is late")

    def _watched_by_people(self) -> list[str]:
        """The services ``nodeau ps`` shows about to move, else those held or recovering."""
        records = [r.workload for r in self.cluster.store.snapshot().workloads]
        waiting = [w for w in records if w.held_reason is HeldReason.WAITING_FOR_DELAY]
        due = [w.name for w in waiting if w.since + w.recovery_after <= self.now]
        recovering = [
            w.name
            for w in records
            if w.state is WorkloadState.RECOVERING and self.weather.react_to_recovering
        ]
        return sorted(due) or sorted([w.name for w in waiting] + recovering)

    def _toggle_drain(self, now: datetime) -> None:
        name = self.rng.choice(sorted(self.machines))
        if self.cluster.nodes[name].drained:
            self.cluster.marks.write_drained(name, None)
            self.say(f"{name} undrained")
        else:
            self.cluster.marks.write_drained(name, now)
            self.say(f"{name} drained")

    # -- the machines ----------------------------------------------------------------------

    def _renew(self) -> None:
        """Every machine that answers renews the signals that are not quiet."""
        now = self.now
        reports = self.cluster.reports.reports
        for m in self.machines.values():
            if not m.answers():
                continue
            if m.kubelet_quiet_until is None:
                self.cluster.nodes[m.name].heartbeat_at = m.node_seen = now
            if m.agent_quiet_until is None:
                self.cluster.reports.publish(evolve(reports[m.name], at=now))
                m.report_seen = now

    def _servers_come_up(self) -> None:
        """Each starting server whose machine's kubelet answers loads its model (a few tens
        of seconds), then is ready."""
        pods = self.cluster.pods.pods
        for key, pod in pods.items():
            if pod.phase is not ServerPhase.STARTING or pod.machine is None:
                continue
            if not self.machines[pod.machine].kubelet_answers():
                continue
            where = (key[1], pod.machine)
            if where not in self.loaded_at:
                load = timedelta(seconds=self.rng.randint(*self.shape.load))
                self.loaded_at[where] = self.now + load
            if self.now >= self.loaded_at[where]:
                pods[key] = evolve(pod, phase=ServerPhase.READY, endpoint="http://10.0.0.7:8080/v1")
