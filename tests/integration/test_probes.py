"""The qualification probes over real HTTP on 127.0.0.1, against stub model servers.

Each known-bad server (tests/support/fakes/bad_backends.py) fails its capability's probe, the good
one passes all; an unreachable, slow or non-JSON server fails every probe, never raises.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
from attrs import evolve
from starlette.responses import Response

from nodeau.adapters.probe_client import answers_health, run_capabilities, run_probes
from nodeau.domain.probes import probes_for
from nodeau.domain.qualification import Capability, ProbeOutcome
from nodeau.domain.tasks import Task
from tests.support.fakes.bad_backends import GOOD, KNOWN_BAD, NOT_JSON, serving_backend
from tests.support.real.upstream import MinimalUpstream, free_port, running_upstream

SEEDS = (0, 1, 2, 3, 4, 5)
MODEL = "stub"


@pytest.fixture(scope="module")
def good_url() -> Iterator[str]:
    with serving_backend(GOOD) as url:
        yield url


@pytest.mark.parametrize("task", list(Task))
@pytest.mark.parametrize("seed", SEEDS)
def test_the_good_server_passes_every_probe_of_its_task(
    good_url: str, task: Task, seed: int
) -> None:
    results = run_probes(good_url, task, MODEL, random.Random(seed), timeout_s=10.0)
    assert [r.capability for r in results] == list(probes_for(task))
    for result in results:
        assert result.outcome is ProbeOutcome.PASSED, result
        assert result.asked.startswith(f"{result.capability.value}: ")
        assert result.answered
        assert result.why


@pytest.mark.parametrize("name", sorted(KNOWN_BAD))
def test_every_known_bad_server_fails_its_probe_over_every_seed(name: str) -> None:
    capability, backend = KNOWN_BAD[name]
    with serving_backend(backend) as url:
        for seed in SEEDS:
            (result,) = run_capabilities(url, [capability], MODEL, random.Random(seed))
            assert result.capability is capability
            assert result.outcome is ProbeOutcome.FAILED, (name, seed, result)
            assert result.why


def test_every_known_bad_server_passes_the_probes_it_does_not_get_wrong() -> None:
    # each is the good server with one thing wrong: its failure is that thing, not noise
    for name, (capability, backend) in KNOWN_BAD.items():
        others = [c for c in Capability if c is not capability]
        with serving_backend(backend) as url:
            results = run_capabilities(url, others, MODEL, random.Random(7))
        assert all(r.passed for r in results), (name, [r for r in results if not r.passed])


def test_every_capability_has_a_known_bad_server() -> None:
    assert {capability for capability, _ in KNOWN_BAD.values()} == set(Capability)


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_an_echo_server_fails_every_probe(seed: int) -> None:
    with running_upstream(MinimalUpstream(model=MODEL)) as url:
        results = run_capabilities(url, list(Capability), MODEL, random.Random(seed))
    assert [r.outcome for r in results] == [ProbeOutcome.FAILED] * len(Capability)


def test_a_body_that_is_not_json_fails_every_probe_with_that_as_evidence() -> None:
    with serving_backend(NOT_JSON) as url:
        results = run_capabilities(url, list(Capability), MODEL, random.Random(0))
    for result in results:
        assert result.outcome is ProbeOutcome.FAILED
        assert "not JSON" in result.answered


def test_an_http_error_is_a_failure_carrying_the_servers_message() -> None:
    _, no_projector = KNOWN_BAD["vision-input: no projector (HTTP 500)"]
    with serving_backend(no_projector) as url:
        (result,) = run_capabilities(url, [Capability.VISION_INPUT], MODEL, random.Random(0))
    assert result.outcome is ProbeOutcome.FAILED
    assert "HTTP 500" in result.answered
    assert "image input is not supported" in result.answered


def test_a_server_that_cannot_be_reached_fails_every_probe() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    results = run_capabilities(url, list(Capability), MODEL, random.Random(0), timeout_s=5.0)
    for result in results:
        assert result.outcome is ProbeOutcome.FAILED
        assert "ConnectError" in result.answered


def test_a_server_slower_than_the_time_out_fails_the_probe() -> None:
    def slow() -> Response:
        time.sleep(1.0)  # uvicorn runs a sync callable inline: the answer comes late
        return Response("{}", media_type="application/json")

    with serving_backend(evolve(GOOD, raw=slow)) as url:
        (result,) = run_capabilities(url, [Capability.CHAT], MODEL, random.Random(0), timeout_s=0.2)
    assert result.outcome is ProbeOutcome.FAILED
    assert "no answer within 0.2 s" in result.answered


def test_a_server_is_ready_only_when_its_health_answers_200(good_url: str) -> None:
    """What a qualification on the fleet waits for before its first probe."""
    with running_upstream(MinimalUpstream()) as no_health:  # a 404 at /health
        assert answers_health(no_health) is False
    assert answers_health(good_url) is True
    assert answers_health(f"http://127.0.0.1:{free_port()}") is False  # nothing listens
