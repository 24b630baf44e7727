"""Machine health from two signals: exact matrices and properties."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.health import (
    SEVERITY,
    Health,
    HealthPolicy,
    MachineHealth,
    Signal,
    Signals,
    assess,
    assess_fleet,
    changes,
    clock_time,
    health_invariants,
    is_quiet,
    next_quiet,
    quiet_signals,
    quiet_since,
    recorded_since,
    unreachable_for,
    unreachable_since,
    upgrading_since,
)

NOW = datetime(2025, 3, 1, 12, 4, 0, tzinfo=UTC)
POLICY = HealthPolicy()
NODE = Signal.NODE_HEARTBEAT
AGENT = Signal.AGENT_REPORT


def at(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(2025, 3, 1, h, m, s, tzinfo=UTC)


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# ---------------------------------------------------------------- the policy


def test_policy_defaults_follow_kubelet_and_the_agent() -> None:
    assert POLICY.node_grace == timedelta(seconds=40)
    assert POLICY.agent_grace == timedelta(seconds=30)


@pytest.mark.parametrize("grace", [timedelta(0), timedelta(seconds=-1)])
def test_policy_refuses_a_grace_that_is_not_positive(grace: timedelta) -> None:
    with pytest.raises(ValueError, match=exactly(f"node_grace must be positive, got {grace}")):
        HealthPolicy(node_grace=grace)
    with pytest.raises(ValueError, match=exactly(f"agent_grace must be positive, got {grace}")):
        HealthPolicy(agent_grace=grace)


def test_policy_accepts_the_smallest_positive_grace() -> None:
    tiny = timedelta(microseconds=1)
    assert HealthPolicy(node_grace=tiny, agent_grace=tiny).node_grace == tiny


# ---------------------------------------------------------------- the signals


def test_signals_refuse_a_naive_time() -> None:
    with pytest.raises(
        ValueError, match=exactly("agent_report_at must carry a timezone, got 2025-03-01T12:00:00")
    ):
        Signals(node_heartbeat_at=None, agent_report_at=datetime(2025, 3, 1, 12, 0))
    with pytest.raises(
        ValueError,
        match=exactly("node_heartbeat_at must carry a timezone, got 2025-03-01T12:00:00"),
    ):
        Signals(node_heartbeat_at=datetime(2025, 3, 1, 12, 0), agent_report_at=None)


def test_a_machine_without_a_node_has_no_node_heartbeat() -> None:
    with pytest.raises(
        ValueError, match=exactly("a machine without a Kubernetes node has no node heartbeat")
    ):
        Signals(node_heartbeat_at=NOW, agent_report_at=NOW, expects_node_heartbeat=False)


def test_one_machine_signals_expect_no_node_heartbeat() -> None:
    s = Signals.one_machine(agent_report_at=NOW, upgrading=True)
    assert s == Signals(
        node_heartbeat_at=None, agent_report_at=NOW, upgrading=True, expects_node_heartbeat=False
    )
    assert Signals.one_machine(agent_report_at=None).upgrading is False


def test_clock_time_prints_utc() -> None:
    assert clock_time(datetime(2025, 3, 1, 14, 3, 9, tzinfo=timezone(timedelta(hours=2)))) == (
        "12:03:09"
    )
    with pytest.raises(
        ValueError, match=exactly("a printed time must carry a timezone, got 2025-03-01T12:00:00")
    ):
        clock_time(datetime(2025, 3, 1, 12, 0))


@pytest.fixture
def far_local_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run with a local zone 5:30 east of UTC (a POSIX TZ string: no tzdata needed)."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_local_zone")
def test_clock_time_ignores_the_local_zone() -> None:
    moment = datetime(2025, 3, 1, 14, 3, 9, tzinfo=timezone(timedelta(hours=2)))
    assert moment.astimezone().utcoffset() == timedelta(hours=5, minutes=30)
    assert clock_time(moment) == "12:03:09"


# ---------------------------------------------------------------- quiet


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (None, True),
        (timedelta(seconds=-5), False),
        (timedelta(0), False),
        (timedelta(seconds=40) - timedelta(microseconds=1), False),
        (timedelta(seconds=40), True),
        (timedelta(seconds=41), True),
    ],
)
def test_quiet_once_the_age_reaches_the_grace(age: timedelta | None, expected: bool) -> None:
    seen = None if age is None else NOW - age
    assert is_quiet(seen, NOW, timedelta(seconds=40)) is expected


def test_quiet_since_is_last_seen_plus_grace() -> None:
    assert quiet_since(at("12:03:00"), timedelta(seconds=40)) == at("12:03:40")
    assert quiet_since(None, timedelta(seconds=40)) is None


@pytest.mark.parametrize(
    ("node_age", "agent_age", "expected"),
    [
        (39.999999, 29.999999, frozenset()),
        (40, 29.999999, frozenset({NODE})),
        (39.999999, 30, frozenset({AGENT})),
        (40, 30, frozenset({NODE, AGENT})),
        (None, None, frozenset({NODE, AGENT})),
    ],
)
def test_each_signal_is_judged_against_its_own_grace(
    node_age: float | None, agent_age: float | None, expected: frozenset[Signal]
) -> None:
    signals = Signals(
        node_heartbeat_at=None if node_age is None else ago(node_age),
        agent_report_at=None if agent_age is None else ago(agent_age),
    )
    assert quiet_signals(signals, NOW, POLICY) == expected


# ---------------------------------------------------------------- the assessment matrix


def two(node: datetime | None, agent: datetime | None, *, upgrading: bool = False) -> Signals:
    return Signals(node_heartbeat_at=node, agent_report_at=agent, upgrading=upgrading)


def one(agent: datetime | None, *, upgrading: bool = False) -> Signals:
    return Signals.one_machine(agent_report_at=agent, upgrading=upgrading)


def health(
    state: Health, since: datetime | None, quiet: set[Signal], sentence: str
) -> MachineHealth:
    return MachineHealth(state=state, since=since, quiet=frozenset(quiet), sentence=sentence)


UPGRADE_SENTENCE = "upgrading: a fleet upgrade is restarting it; nothing moves"
BOTH = {NODE, AGENT}


@pytest.mark.parametrize(
    ("signals", "expected"),
    [
        (
            two(ago(5), ago(5)),
            health(Health.REPORTING, None, set(), "reporting: both signals fresh"),
        ),
        (
            two(ago(5), at("12:03:10")),
            health(
                Health.DEGRADED,
                at("12:03:40"),
                {AGENT},
                "degraded: Nodeau's agent is quiet since 12:03:40; nothing moves",
            ),
        ),
        (
            two(at("12:03:00"), ago(5)),
            health(
                Health.DEGRADED,
                at("12:03:40"),
                {NODE},
                "degraded: its Kubernetes agent is quiet since 12:03:40; nothing moves",
            ),
        ),
        (
            two(None, ago(5)),
            health(
                Health.DEGRADED,
                None,
                {NODE},
                "degraded: its Kubernetes agent has never reported; nothing moves",
            ),
        ),
        (
            two(ago(5), None),
            health(
                Health.DEGRADED,
                None,
                {AGENT},
                "degraded: Nodeau's agent has never reported; nothing moves",
            ),
        ),
        (
            two(at("12:03:00"), at("12:02:30")),
            health(
                Health.UNREACHABLE,
                at("12:03:40"),
                BOTH,
                "unreachable since 12:03:40: both signals quiet",
            ),
        ),
        (
            two(at("12:02:00"), at("12:03:10")),
            health(
                Health.UNREACHABLE,
                at("12:03:40"),
                BOTH,
                "unreachable since 12:03:40: both signals quiet",
            ),
        ),
        (
            two(None, at("12:02:30")),
            health(
                Health.UNREACHABLE,
                at("12:03:00"),
                BOTH,
                "unreachable since 12:03:00: both signals quiet",
            ),
        ),
        (
            two(at("12:02:20"), None),
            health(
                Health.UNREACHABLE,
                at("12:03:00"),
                BOTH,
                "unreachable since 12:03:00: both signals quiet",
            ),
        ),
        (
            two(None, None),
            health(Health.UNREACHABLE, NOW, BOTH, "unreachable since 12:04:00: both signals quiet"),
        ),
        (
            two(ago(5), ago(5), upgrading=True),
            health(Health.UPGRADING, NOW, set(), UPGRADE_SENTENCE),
        ),
        (
            two(None, at("12:00:00"), upgrading=True),
            health(Health.UPGRADING, NOW, BOTH, UPGRADE_SENTENCE),
        ),
        (one(ago(5)), health(Health.REPORTING, None, set(), "reporting: Nodeau's agent is fresh")),
        (
            one(at("12:03:10")),
            health(
                Health.UNREACHABLE,
                at("12:03:40"),
                {AGENT},
                "unreachable since 12:03:40: Nodeau's agent is quiet",
            ),
        ),
        (
            one(None),
            health(
                Health.UNREACHABLE,
                NOW,
                {AGENT},
                "unreachable since 12:04:00: Nodeau's agent is quiet",
            ),
        ),
        (one(None, upgrading=True), health(Health.UPGRADING, NOW, {AGENT}, UPGRADE_SENTENCE)),
    ],
)
def test_assessment_matrix(signals: Signals, expected: MachineHealth) -> None:
    assert assess(signals, NOW, POLICY) == expected


def test_assess_uses_the_default_policy_when_none_is_given() -> None:
    signals = Signals(node_heartbeat_at=ago(39), agent_report_at=ago(30))
    assert assess(signals, NOW).state is Health.DEGRADED
    assert assess(signals, NOW).quiet == frozenset({AGENT})


def test_assess_uses_the_policy_it_is_given() -> None:
    signals = Signals(node_heartbeat_at=ago(50), agent_report_at=ago(50))
    wide = HealthPolicy(node_grace=timedelta(minutes=1), agent_grace=timedelta(minutes=1))
    assert assess(signals, NOW, wide).state is Health.REPORTING
    narrow = HealthPolicy(node_grace=timedelta(seconds=45), agent_grace=timedelta(minutes=1))
    assert assess(signals, NOW, narrow).sentence == (
        "degraded: its Kubernetes agent is quiet since 12:03:55; nothing moves"
    )


def test_assess_refuses_a_naive_now() -> None:
    signals = Signals(node_heartbeat_at=None, agent_report_at=None)
    with pytest.raises(
        ValueError, match=exactly("now must carry a timezone, got 2025-03-01T12:04:00")
    ):
        assess(signals, datetime(2025, 3, 1, 12, 4))


# ---------------------------------------------------------------- the recorded moment

QUIET = Signals(
    node_heartbeat_at=at("12:03:00"), agent_report_at=at("12:02:30")
)  # both by 12:03:40


def recorded(state: Health, since: datetime) -> MachineHealth:
    quiet = frozenset({NODE, AGENT})
    return MachineHealth(state=state, since=since, quiet=quiet, sentence="recorded earlier")


@pytest.mark.parametrize(
    ("previous", "expected"),
    [
        (None, at("12:03:40")),
        # recorded before the node's last heartbeat went quiet (12:03:40): the machine
        # answered since, unseen by a late assessment; this is a new spell
        (recorded(Health.UNREACHABLE, at("12:03:00")), at("12:03:40")),
        (recorded(Health.UNREACHABLE, at("12:03:50")), at("12:03:50")),
        (recorded(Health.UNREACHABLE, NOW), NOW),
        (recorded(Health.UNREACHABLE, NOW + timedelta(seconds=1)), at("12:03:40")),
        (
            MachineHealth(
                state=Health.DEGRADED, since=at("12:00:00"), quiet=frozenset({AGENT}), sentence="x"
            ),
            at("12:03:40"),
        ),
        (recorded(Health.UPGRADING, at("12:00:00")), NOW),
        (
            MachineHealth(state=Health.REPORTING, since=None, quiet=frozenset(), sentence="x"),
            at("12:03:40"),
        ),
    ],
)
def test_unreachable_since_is_recorded_once(
    previous: MachineHealth | None, expected: datetime
) -> None:
    assert unreachable_since(QUIET, NOW, POLICY, previous) == expected
    health = assess(QUIET, NOW, POLICY, previous)
    assert health.since == expected
    assert health.sentence == f"unreachable since {clock_time(expected)}: both signals quiet"


@pytest.mark.parametrize(
    ("previous", "expected"),
    [
        (None, NOW),
        (recorded(Health.UPGRADING, at("12:01:00")), at("12:01:00")),
        (recorded(Health.UPGRADING, NOW), NOW),
        (recorded(Health.UPGRADING, NOW + timedelta(seconds=1)), NOW),
        (recorded(Health.UNREACHABLE, at("12:01:00")), NOW),
    ],
)
def test_upgrading_since_is_when_the_mark_was_first_seen(
    previous: MachineHealth | None, expected: datetime
) -> None:
    assert upgrading_since(NOW, previous) == expected
    marked = Signals(node_heartbeat_at=ago(1), agent_report_at=ago(1), upgrading=True)
    assert assess(marked, NOW, POLICY, previous).since == expected


def test_recorded_since_only_for_the_same_state_and_not_after_now() -> None:
    before = recorded(Health.UNREACHABLE, at("12:03:00"))
    assert recorded_since(before, Health.UNREACHABLE, NOW) == at("12:03:00")
    assert recorded_since(before, Health.UPGRADING, NOW) is None
    assert recorded_since(None, Health.UNREACHABLE, NOW) is None
    assert recorded_since(before, Health.UNREACHABLE, at("12:02:59")) is None
    assert recorded_since(before, Health.UNREACHABLE, at("12:03:00")) == at("12:03:00")


def test_a_previous_degraded_or_reporting_state_does_not_change_the_assessment() -> None:
    degraded = assess(Signals(node_heartbeat_at=ago(1), agent_report_at=None), NOW, POLICY)
    fresh = Signals(node_heartbeat_at=ago(1), agent_report_at=ago(1))
    assert assess(fresh, NOW, POLICY, degraded) == assess(fresh, NOW, POLICY)


# ---------------------------------------------------------------- unreachable_for


@pytest.mark.parametrize(
    ("health", "now", "expected"),
    [
        (recorded(Health.UNREACHABLE, at("12:03:00")), NOW, timedelta(minutes=1)),
        (recorded(Health.UNREACHABLE, at("12:03:00")), at("12:03:00"), timedelta(0)),
        (recorded(Health.UNREACHABLE, at("12:03:00")), at("12:02:00"), timedelta(0)),
        (recorded(Health.UPGRADING, at("12:03:00")), NOW, timedelta(0)),
        (
            MachineHealth(
                state=Health.DEGRADED, since=at("12:00:00"), quiet=frozenset({NODE}), sentence="x"
            ),
            NOW,
            timedelta(0),
        ),
        (
            MachineHealth(state=Health.REPORTING, since=None, quiet=frozenset(), sentence="x"),
            NOW,
            timedelta(0),
        ),
    ],
)
def test_unreachable_for(health: MachineHealth, now: datetime, expected: timedelta) -> None:
    assert unreachable_for(health, now) == expected


# ---------------------------------------------------------------- impossible assessments

REPORTING_MESSAGE = "a reporting machine has no quiet signal and no since"


@pytest.mark.parametrize(
    ("state", "since", "quiet", "message"),
    [
        (Health.REPORTING, None, {NODE}, REPORTING_MESSAGE),
        (Health.REPORTING, NOW, set(), REPORTING_MESSAGE),
        (Health.DEGRADED, NOW, set(), "a degraded machine has exactly one quiet signal"),
        (Health.DEGRADED, NOW, {NODE, AGENT}, "a degraded machine has exactly one quiet signal"),
        (
            Health.UNREACHABLE,
            NOW,
            set(),
            "an unreachable machine has quiet signals and a recorded since",
        ),
        (
            Health.UNREACHABLE,
            None,
            {NODE, AGENT},
            "an unreachable machine has quiet signals and a recorded since",
        ),
        (
            Health.UPGRADING,
            None,
            set(),
            "an upgrading machine records since when it carries the mark",
        ),
        (
            Health.UNREACHABLE,
            datetime(2025, 3, 1, 12, 0),
            {AGENT},
            "since must carry a timezone, got 2025-03-01T12:00:00",
        ),
    ],
)
def test_impossible_assessments_are_refused(
    state: Health, since: datetime | None, quiet: set[Signal], message: str
) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        health_invariants(state, since, frozenset(quiet))
    with pytest.raises(ValueError, match=exactly(message)):
        MachineHealth(state=state, since=since, quiet=frozenset(quiet), sentence="x")


@pytest.mark.parametrize(
    ("state", "since", "quiet"),
    [
        (Health.REPORTING, None, set()),
        (Health.DEGRADED, None, {AGENT}),
        (Health.DEGRADED, NOW, {NODE}),
        (Health.UNREACHABLE, NOW, {AGENT}),
        (Health.UPGRADING, NOW, set()),
        (Health.UPGRADING, NOW, {NODE, AGENT}),
    ],
)
def test_possible_assessments_are_accepted(
    state: Health, since: datetime | None, quiet: set[Signal]
) -> None:
    assert (
        MachineHealth(state=state, since=since, quiet=frozenset(quiet), sentence="x").state is state
    )


# ---------------------------------------------------------------- properties

nows = st.datetimes(
    min_value=datetime(2001, 1, 1), max_value=datetime(2099, 1, 1), timezones=st.just(UTC)
)
# Milliseconds around now, the graces' edges among them (exactly at a grace is quiet).
offsets = st.one_of(
    st.sampled_from([-40_001, -40_000, -39_999, -30_001, -30_000, -29_999]),
    st.integers(min_value=-300_000, max_value=5_000),
).map(lambda ms: timedelta(milliseconds=ms))


@st.composite
def signal_sets(draw: st.DrawFn, now: datetime) -> Signals:
    """Signals seen around ``now`` (a little in the future too: clocks differ)."""
    two = draw(st.booleans())
    node = draw(st.none() | offsets) if two else None
    agent = draw(st.none() | offsets)
    return Signals(
        node_heartbeat_at=None if node is None else now + node,
        agent_report_at=None if agent is None else now + agent,
        upgrading=draw(st.booleans()),
        expects_node_heartbeat=two,
    )


@st.composite
def situations(draw: st.DrawFn) -> tuple[Signals, datetime, MachineHealth | None]:
    now = draw(nows)
    signals = draw(signal_sets(now))
    previous = None
    if draw(st.booleans()):
        then = now + draw(offsets)
        previous = assess(draw(signal_sets(then)), then, POLICY)
    return signals, now, previous


# The oracle of the property below, kept apart from the module's helpers: the graces
# written out (kubelet's 40 s node grace, the agent's 30 s), a signal quiet when never
# seen or last seen at least its grace ago, and the state from how many of the signals
# that count on the plane are quiet.
GRACE = {NODE: timedelta(seconds=40), AGENT: timedelta(seconds=30)}


def counted(signals: Signals) -> frozenset[Signal]:
    return frozenset({NODE, AGENT}) if signals.expects_node_heartbeat else frozenset({AGENT})


def modelled(signals: Signals, now: datetime) -> tuple[Health, frozenset[Signal]]:
    seen_at = {NODE: signals.node_heartbeat_at, AGENT: signals.agent_report_at}
    last = {s: seen_at[s] for s in counted(signals)}
    quiet = frozenset(s for s, seen in last.items() if seen is None or seen + GRACE[s] <= now)
    if signals.upgrading:
        return Health.UPGRADING, quiet
    if len(quiet) == len(last):
        return Health.UNREACHABLE, quiet
    return (Health.DEGRADED if quiet else Health.REPORTING), quiet


@given(situations())
def test_the_state_and_the_quiet_signals_follow_a_model_of_the_two_signals(
    situation: tuple[Signals, datetime, MachineHealth | None],
) -> None:
    signals, now, previous = situation
    health = assess(signals, now, POLICY, previous)
    assert (health.state, health.quiet) == modelled(signals, now)
    if health.state is Health.DEGRADED:
        (signal,) = health.quiet
        seen = signals.agent_report_at if signal is AGENT else signals.node_heartbeat_at
        assert health.since == (None if seen is None else seen + GRACE[signal])


@given(situations())
def test_upgrading_whatever_the_signals(
    situation: tuple[Signals, datetime, MachineHealth | None],
) -> None:
    signals, now, previous = situation
    marked = Signals(
        node_heartbeat_at=signals.node_heartbeat_at,
        agent_report_at=signals.agent_report_at,
        upgrading=True,
        expects_node_heartbeat=signals.expects_node_heartbeat,
    )
    health = assess(marked, now, POLICY, previous)
    assert health.state is Health.UPGRADING
    assert health.sentence == "upgrading: a fleet upgrade is restarting it; nothing moves"


@given(nows, st.booleans(), st.data())
def test_fresh_signals_always_report(now: datetime, two: bool, data: st.DataObject) -> None:
    def fresh(grace: timedelta) -> datetime:
        ms = data.draw(st.integers(min_value=0, max_value=grace // timedelta(milliseconds=1) - 1))
        return now - timedelta(milliseconds=ms)

    signals = Signals(
        node_heartbeat_at=fresh(POLICY.node_grace) if two else None,
        agent_report_at=fresh(POLICY.agent_grace),
        expects_node_heartbeat=two,
    )
    health = assess(signals, now, POLICY)
    assert health.state is Health.REPORTING
    assert health.since is None
    assert health.quiet == frozenset()


@given(situations())
def test_since_is_never_after_now(
    situation: tuple[Signals, datetime, MachineHealth | None],
) -> None:
    signals, now, previous = situation
    health = assess(signals, now, POLICY, previous)
    assert health.since is None or health.since <= now
    assert unreachable_for(health, now) >= timedelta(0)


@given(situations())
def test_degraded_names_its_one_quiet_signal(
    situation: tuple[Signals, datetime, MachineHealth | None],
) -> None:
    signals, now, previous = situation
    health = assess(signals, now, POLICY, previous)
    if health.state is Health.DEGRADED:
        (signal,) = health.quiet
        name = "its Kubernetes agent" if signal is NODE else "Nodeau's agent"
        assert health.sentence.startswith(f"degraded: {name} ")
        assert health.sentence.endswith("; nothing moves")


@given(nows, st.data())
def test_a_fresher_signal_never_makes_the_state_worse(now: datetime, data: st.DataObject) -> None:
    signals = data.draw(signal_sets(now))
    which = data.draw(st.sampled_from(sorted(counted(signals))))
    before = signals.node_heartbeat_at if which is NODE else signals.agent_report_at
    gain = data.draw(offsets.map(abs))
    fresher = now + data.draw(offsets) if before is None else before + gain
    changed = Signals(
        node_heartbeat_at=fresher if which is NODE else signals.node_heartbeat_at,
        agent_report_at=fresher if which is AGENT else signals.agent_report_at,
        upgrading=signals.upgrading,
        expects_node_heartbeat=signals.expects_node_heartbeat,
    )
    old, new = assess(signals, now, POLICY), assess(changed, now, POLICY)
    if signals.upgrading:
        assert old.state is new.state is Health.UPGRADING
    else:
        assert SEVERITY[new.state] <= SEVERITY[old.state]
        assert new.quiet <= old.quiet


@given(situations(), offsets.map(abs))
def test_a_recorded_unreachable_moment_is_kept_while_nothing_changes(
    situation: tuple[Signals, datetime, MachineHealth | None], later: timedelta
) -> None:
    signals, now, previous = situation
    first = assess(signals, now, POLICY, previous)
    second = assess(signals, now + later, POLICY, first)
    if first.state is Health.UNREACHABLE:
        assert second.state is Health.UNREACHABLE
        assert second.since == first.since
        assert second.sentence == first.sentence
        assert unreachable_for(second, now + later) == unreachable_for(first, now) + later


def test_the_next_moment_a_fresh_signal_can_go_quiet() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    both = Signals(node_heartbeat_at=now - timedelta(seconds=5), agent_report_at=now)
    assert next_quiet(both, now) == now + timedelta(seconds=30)  # the agent's grace first
    agent_quiet = Signals(node_heartbeat_at=now, agent_report_at=now - timedelta(minutes=5))
    assert next_quiet(agent_quiet, now) == now + timedelta(seconds=40)
    gone = Signals(node_heartbeat_at=None, agent_report_at=now - timedelta(minutes=5))
    assert next_quiet(gone, now) is None


def said(state: Health, sentence: str) -> MachineHealth:
    """An assessment in ``state`` saying ``sentence`` (unreachable: both signals quiet)."""
    quiet = {NODE, AGENT} if state is Health.UNREACHABLE else set()
    return health(state, NOW if state is Health.UNREACHABLE else None, quiet, sentence)


def test_the_log_names_each_machine_that_appeared_or_changed_state_and_no_other() -> None:
    before = {
        "m1": said(Health.REPORTING, "m1 answers"),
        "m2": said(Health.REPORTING, "m2 answers"),
    }
    after = {
        "m1": said(Health.REPORTING, "m1 answers, said otherwise"),
        "m2": said(Health.UNREACHABLE, "m2 stopped answering"),
        "m3": said(Health.REPORTING, "m3 answers"),
    }
    assert changes(before, after) == ("machine m2: m2 stopped answering", "machine m3: m3 answers")
    assert changes(after, after) == ()


def test_machines_are_assessed_by_the_policy_given() -> None:
    quiet_for_a_minute = Signals(
        node_heartbeat_at=NOW - timedelta(seconds=60), agent_report_at=NOW - timedelta(seconds=60)
    )
    patient = HealthPolicy(node_grace=timedelta(minutes=5), agent_grace=timedelta(minutes=5))
    found = assess_fleet({"m1": quiet_for_a_minute}, {}, NOW, policy=patient)
    assert found["m1"].state is Health.REPORTING
    assert assess_fleet({"m1": quiet_for_a_minute}, {}, NOW)["m1"].state is Health.UNREACHABLE


T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
QUIET_AT_T = Signals(
    node_heartbeat_at=T - timedelta(seconds=40), agent_report_at=T - timedelta(seconds=30)
)


def test_the_recorded_moment_is_kept_when_the_signals_went_quiet_exactly_then() -> None:
    before = MachineHealth(
        state=Health.UNREACHABLE,
        since=T,
        quiet=frozenset({Signal.NODE_HEARTBEAT, Signal.AGENT_REPORT}),
        sentence="unreachable",
    )
    now = T + timedelta(minutes=5)
    found = assess(QUIET_AT_T, now, None, before, watching_since=T + timedelta(minutes=2))
    assert (found.state, found.since) == (Health.UNREACHABLE, T)


def test_a_watching_since_without_its_zone_is_refused_in_these_words() -> None:
    with pytest.raises(
        ValueError, match=r"^watching_since must carry a timezone, got 2026-03-01T12:00:00$"
    ):
        assess(QUIET_AT_T, T, watching_since=datetime(2026, 3, 1, 12, 0))


QUIET_NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_signal_whose_grace_ends_exactly_now_is_quiet_already() -> None:
    signals = Signals(
        node_heartbeat_at=QUIET_NOW - timedelta(seconds=40),
        agent_report_at=QUIET_NOW - timedelta(seconds=30),
    )
    assert next_quiet(signals, QUIET_NOW) is None
    later = Signals(node_heartbeat_at=QUIET_NOW - timedelta(seconds=40), agent_report_at=QUIET_NOW)
    assert next_quiet(later, QUIET_NOW) == QUIET_NOW + timedelta(seconds=30)


def test_the_next_quiet_moment_is_counted_by_the_policy_given() -> None:
    signals = Signals(node_heartbeat_at=QUIET_NOW, agent_report_at=QUIET_NOW)
    policy = HealthPolicy(node_grace=timedelta(minutes=3), agent_grace=timedelta(minutes=2))
    assert next_quiet(signals, QUIET_NOW, policy) == QUIET_NOW + timedelta(minutes=2)


def test_a_now_without_its_zone_is_refused_in_these_words() -> None:
    signals = Signals(node_heartbeat_at=QUIET_NOW, agent_report_at=QUIET_NOW)
    with pytest.raises(ValueError, match=r"^now must carry a timezone, got 2026-03-01T12:00:00$"):
        next_quiet(signals, datetime(2026, 3, 1, 12, 0))
