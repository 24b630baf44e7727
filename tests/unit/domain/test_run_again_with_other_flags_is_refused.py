"""Running a name that serves again, with flags (domain/runs.py ``run_step``, ``differences``):
a flag left out means "as it is", one that matches changes nothing, one that differs is
refused with a sentence naming it and how to change it, each sentence written out whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve

from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.runs import Asked, EndpointBack, NotAsAsked, RunsWith, run_step, runs_with
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, Workload, WorkloadKind, WorkloadState

ARTIFACT = "9f2c3b1a7d6e5f40aa"
THREE_MINUTES = timedelta(minutes=3)
NOW = RunsWith(
    context_tokens=100,
    task=Task.CHAT,
    recovery=RecoveryMode.NEVER,
    recovery_after=THREE_MINUTES,
    on_cpu=False,
    allowed_origins=(),
)
STOP_AND_RUN = (
    "a model server keeps what it was started with: stop it with nodeau stop tiny --workload "
    "and run it again with those (or give another --name)"
)


def serving() -> Workload:
    return Workload(
        name="tiny",
        kind=WorkloadKind.SERVICE,
        model="smollm2",
        artifact_id=ARTIFACT,
        machine="m1",
        gpu_uuid="GPU-1",
        state=WorkloadState.SERVING,
        since=datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
    )


def step(
    asked: Asked, origins: tuple[str, ...] = (), now: RunsWith = NOW
) -> EndpointBack | NotAsAsked:
    found = run_step(serving(), artifact_id=ARTIFACT, asked=asked, origins=origins, runs_with=now)
    assert isinstance(found, EndpointBack | NotAsAsked)
    return found


@pytest.mark.parametrize(
    "asked",
    [
        Asked(),
        Asked(context_tokens=100),
        Asked(task=Task.CHAT),
        Asked(recovery=RecoveryMode.NEVER),
        Asked(on_cpu=False),
        # a delay means nothing to a workload that never recovers: it is as it is
        Asked(recovery_after=timedelta(minutes=5)),
        Asked(context_tokens=100, task=Task.CHAT, recovery=RecoveryMode.NEVER, on_cpu=False),
    ],
)
def test_flags_left_out_or_as_it_is_bring_the_endpoint_back(asked: Asked) -> None:
    assert step(asked) == EndpointBack(workload=serving())


def test_another_context_is_refused_naming_both_and_how_to_change_it() -> None:
    assert step(Asked(context_tokens=2048)) == NotAsAsked(
        sentence="tiny already serves with --context 100, not --context 2048 as asked, and "
        f"nothing was changed; {STOP_AND_RUN}"
    )


def test_another_task_and_the_cpu_are_refused_in_one_sentence() -> None:
    assert step(Asked(task=Task.EMBED, on_cpu=True)) == NotAsAsked(
        sentence="tiny already serves with --task chat and no --cpu, not --task embed and "
        f"--cpu as asked, and nothing was changed; {STOP_AND_RUN}"
    )


def test_another_recovery_is_refused_naming_the_command_that_changes_it() -> None:
    assert step(Asked(recovery=RecoveryMode.AUTOMATIC)) == NotAsAsked(
        sentence="tiny already serves with --recovery never, not --recovery automatic "
        "--after 3m as asked, and nothing was changed; nodeau recovery set tiny automatic "
        "--after 3m changes its recovery, with no restart"
    )
    automatic = RunsWith(
        context_tokens=100,
        task=Task.CHAT,
        recovery=RecoveryMode.AUTOMATIC,
        recovery_after=THREE_MINUTES,
    )
    assert step(Asked(recovery_after=timedelta(minutes=10)), now=automatic) == NotAsAsked(
        sentence="tiny already serves with --recovery automatic --after 3m, not --recovery "
        "automatic --after 10m as asked, and nothing was changed; nodeau recovery set tiny "
        "automatic --after 10m changes its recovery, with no restart"
    )
    assert step(Asked(recovery=RecoveryMode.NEVER), now=automatic) == NotAsAsked(
        sentence="tiny already serves with --recovery automatic --after 3m, not --recovery "
        "never as asked, and nothing was changed; nodeau recovery set tiny never changes its "
        "recovery, with no restart"
    )


def test_other_origins_are_refused_while_the_endpoint_runs() -> None:
    assert step(Asked(), origins=("https://app.example",)) == NotAsAsked(
        sentence="tiny already serves with no --allow-origin, not --allow-origin "
        "https://app.example as asked, and nothing was changed; its endpoint answers the "
        "same pages while it runs: nodeau stop tiny stops it (the model stays loaded) and "
        "nodeau run tiny with those starts it again"
    )
    same = RunsWith(
        context_tokens=100,
        task=Task.CHAT,
        recovery=RecoveryMode.NEVER,
        recovery_after=THREE_MINUTES,
        allowed_origins=("https://app.example",),
    )
    assert step(Asked(), origins=("https://app.example",), now=same) == EndpointBack(
        workload=serving()
    )


def test_a_stopped_endpoint_starts_with_the_origins_asked() -> None:
    stopped = RunsWith(
        context_tokens=100,
        task=Task.CHAT,
        recovery=RecoveryMode.NEVER,
        recovery_after=THREE_MINUTES,
        allowed_origins=None,
    )
    assert step(Asked(), origins=("https://app.example",), now=stopped) == EndpointBack(
        workload=serving()
    )
    # its model server's flags are compared all the same
    assert isinstance(step(Asked(context_tokens=2048), now=stopped), NotAsAsked)


def test_a_context_not_known_yet_is_not_compared() -> None:
    undecided = RunsWith(
        context_tokens=None,
        task=Task.CHAT,
        recovery=RecoveryMode.NEVER,
        recovery_after=THREE_MINUTES,
    )
    assert step(Asked(context_tokens=2048), now=undecided) == EndpointBack(workload=serving())


def test_without_what_it_runs_with_nothing_is_compared() -> None:
    found = run_step(serving(), artifact_id=ARTIFACT, asked=Asked(context_tokens=2048))
    assert found == EndpointBack(workload=serving())


def test_what_a_recorded_workload_runs_with_is_read_from_its_record() -> None:
    recorded = evolve(
        serving(),
        recovery_mode=RecoveryMode.AUTOMATIC,
        recovery_after=timedelta(minutes=7),
        on_cpu=True,
    )
    record = WorkloadRecord(
        workload=recorded,
        config=RuntimeConfig(context_tokens=8192, task=Task.EMBED),
        model_path="/m/tiny.gguf",
    )
    assert runs_with(record, ("https://app.example",)) == RunsWith(
        context_tokens=8192,
        task=Task.EMBED,
        recovery=RecoveryMode.AUTOMATIC,
        recovery_after=timedelta(minutes=7),
        on_cpu=True,
        allowed_origins=("https://app.example",),
    )
    assert runs_with(record, None).allowed_origins is None


def test_three_flags_that_differ_are_named_in_one_list() -> None:
    on_cpu = evolve(NOW, on_cpu=True)
    assert step(Asked(context_tokens=2048, task=Task.EMBED, on_cpu=False), now=on_cpu) == (
        NotAsAsked(
            sentence="tiny already serves with --context 100, --task chat and --cpu, not "
            "--context 2048, --task embed and no --cpu as asked, and nothing was changed; "
            f"{STOP_AND_RUN}"
        )
    )


def test_flags_changed_in_two_ways_say_both_ways() -> None:
    answering = evolve(NOW, allowed_origins=("https://a.example", "https://b.example"))
    assert step(
        Asked(context_tokens=2048, recovery=RecoveryMode.AUTOMATIC),
        origins=("https://c.example",),
        now=answering,
    ) == NotAsAsked(
        sentence="tiny already serves with --context 100, --recovery never and "
        "--allow-origin https://a.example --allow-origin https://b.example, not --context "
        "2048, --recovery automatic --after 3m and --allow-origin https://c.example as "
        f"asked, and nothing was changed; {STOP_AND_RUN}; nodeau recovery set tiny automatic "
        "--after 3m changes its recovery, with no restart; its endpoint answers the same "
        "pages while it runs: nodeau stop tiny stops it (the model stays loaded) and nodeau "
        "run tiny with those starts it again"
    )
