"""What an agent keeps of each Pod's memory per card between samples (``after_sample``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.hardware import CardProcess, PodMemory, PodWatch, after_sample
from nodeau.domain.memory import MIB

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEEP = timedelta(minutes=5)
A, B = "pod-a", "pod-b"
GPU0, GPU1 = "GPU-0", "GPU-1"


def proc(pid: int, gpu: str, mib: int) -> CardProcess:
    return CardProcess(pid=pid, gpu_uuid=gpu, used_bytes=mib * MIB)


def memory(pod: str, gpu: str, used: int, peak: int) -> PodMemory:
    return PodMemory(pod_uid=pod, gpu_uuid=gpu, used_bytes=used * MIB, peak_bytes=peak * MIB)


def test_a_pods_peak_is_the_most_any_sample_saw_and_now_is_the_last() -> None:
    watch = PodWatch()
    for seconds, mib in enumerate((300, 900, 700)):
        watch = after_sample(
            watch, [(A, proc(10, GPU0, mib))], T0 + timedelta(seconds=seconds), KEEP
        )
    assert watch.memory() == (memory(A, GPU0, 700, 900),)


def test_a_pods_processes_on_one_card_add_up_and_each_card_is_its_own() -> None:
    sample = [(A, proc(10, GPU0, 500)), (A, proc(11, GPU0, 20)), (A, proc(10, GPU1, 40)),
              (B, proc(12, GPU0, 100))]  # fmt: skip
    watch = after_sample(PodWatch(), sample, T0, KEEP)
    assert watch.memory() == (
        memory(A, GPU0, 520, 520),
        memory(A, GPU1, 40, 40),
        memory(B, GPU0, 100, 100),
    )


def test_a_pod_no_sample_lists_holds_nothing_now_keeps_its_peak_then_is_forgotten() -> None:
    watch = after_sample(PodWatch(), [(A, proc(10, GPU0, 800)), (B, proc(11, GPU0, 1))], T0, KEEP)
    later = after_sample(watch, [(B, proc(11, GPU0, 1))], T0 + KEEP, KEEP)
    assert later.memory() == (memory(A, GPU0, 0, 800), memory(B, GPU0, 1, 1))
    # its server restarted in the Pod: a smaller figure does not lower the peak
    again = after_sample(later, [(A, proc(99, GPU0, 200))], T0 + KEEP, KEEP)
    assert again.memory()[0] == memory(A, GPU0, 200, 800)
    gone = after_sample(later, [], T0 + KEEP + timedelta(microseconds=1), KEEP)
    assert gone.memory() == (memory(B, GPU0, 0, 1),)  # B was seen at T0 + KEEP


def test_a_pod_memory_never_holds_more_than_its_peak() -> None:
    with pytest.raises(ValueError, match="more than its peak"):
        memory(A, GPU0, 2, 1)
    with pytest.raises(ValueError):
        CardProcess(pid=0, gpu_uuid=GPU0, used_bytes=1)
    with pytest.raises(ValueError):
        CardProcess(pid=1, gpu_uuid=GPU0, used_bytes=-1)


SAMPLES = st.lists(
    st.lists(
        st.tuples(st.sampled_from([A, B]), st.sampled_from([GPU0, GPU1]), st.integers(0, 4096)),
        max_size=4,
    ),
    max_size=12,
)


@given(SAMPLES)
def test_while_kept_a_peak_never_falls_and_is_at_least_every_figure_seen(
    samples: list[list[tuple[str, str, int]]],
) -> None:
    watch = PodWatch()
    seen: dict[tuple[str, str], int] = {}
    for i, sample in enumerate(samples):
        before = {(m.pod_uid, m.gpu_uuid): m.peak_bytes for m in watch.memory()}
        listed = [(pod, proc(1 + n, gpu, mib)) for n, (pod, gpu, mib) in enumerate(sample)]
        watch = after_sample(watch, listed, T0 + timedelta(seconds=i), KEEP)
        now: dict[tuple[str, str], int] = {}
        for pod, p in listed:
            now[(pod, p.gpu_uuid)] = now.get((pod, p.gpu_uuid), 0) + p.used_bytes
        for key, used in now.items():
            seen[key] = max(seen.get(key, 0), used)
        after = {(m.pod_uid, m.gpu_uuid): m for m in watch.memory()}
        assert set(after) == set(before) | set(now)  # nothing forgotten within KEEP
        for key, m in after.items():
            assert m.peak_bytes >= before.get(key, 0)
            assert m.peak_bytes == seen[key]
            assert m.used_bytes == now.get(key, 0)
