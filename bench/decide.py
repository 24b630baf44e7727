"""The pure domain's admission and placement at fleet sizes, on one core.

Usage: .venv/bin/python bench/decide.py [--machines 100 1000] [--cards 8] [--decisions 1000]
Prints decisions per second and their cost growth against ADR 0018's goals: >= 5,000 a second
at 1,000 machines x 8 cards, cost growing <= 12x from 100 to 1,000. Method: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from returns.result import Failure, Success

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodeau.domain.admission import AdmissionRequest  # noqa: E402
from nodeau.domain.allowances import Allowances  # noqa: E402
from nodeau.domain.free_cards import FreeCards  # noqa: E402
from nodeau.domain.hardware import Fleet, Gpu, Machine  # noqa: E402
from nodeau.domain.memory import (  # noqa: E402
    GIB,
    Architecture,
    MeasuredTable,
    RuntimeConfig,
    predictor,
)
from nodeau.domain.placement import SchedulingSettings  # noqa: E402
from nodeau.domain.plans import ENTERPRISE  # noqa: E402
from nodeau.domain.reservations import Ledger  # noqa: E402
from nodeau.domain.scheduling import FleetView, scheduled_admission  # noqa: E402
from nodeau.domain.workloads import RecoveryMode, WorkloadKind  # noqa: E402

GOAL_PER_S = 5000.0
GOAL_GROWTH = 12.0
CARD_BYTES = 80 * GIB
GPU_MODEL = "NVIDIA H100 80GB HBM3"
ARTIFACT = "cd" * 32
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def fleet_of(machines: int, cards: int) -> Fleet:
    return Fleet(
        machines=tuple(
            Machine(
                name=f"m{m:04d}",
                gpus=tuple(
                    Gpu(uuid=f"GPU-{m:04d}-{c}", model=GPU_MODEL, total_bytes=CARD_BYTES)
                    for c in range(cards)
                ),
            )
            for m in range(machines)
        )
    )


def llama_8b() -> Architecture:
    return Architecture(
        name="llama", n_layers=32, n_embd=4096, n_head=32, n_head_kv=8, key_length=128,
        value_length=128, n_vocab=128256, n_ff=14336, context_length=8192,
    )  # fmt: skip


def decide_all(fleet: Fleet, decisions: int) -> tuple[float, float, float, int]:
    """Seconds to make the free cards' index, then to take ``decisions`` decisions in a row
    over a filling ledger (both elapsed), the CPU seconds of both, and how many admitted."""
    config = RuntimeConfig(context_tokens=8192)
    predict = predictor(
        arch=llama_8b(), artifact_id=ARTIFACT, artifact_bytes=5 * GIB, config=config,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    verified = frozenset(m.name for m in fleet.machines)
    admitted = 0
    started, cpu = time.perf_counter(), time.process_time()
    cards = FreeCards.of(fleet, Ledger(), SchedulingSettings(), ENTERPRISE)
    made = time.perf_counter()
    for k in range(decisions):
        request = AdmissionRequest(
            workload=f"w{k}", model="llama-8b", artifact_id=ARTIFACT, config=config
        )
        view = FleetView(
            fleet=fleet, ledger=cards.ledger, settings=cards.settings, excluded=(),
            verified_on=verified, predict=predict, plan=ENTERPRISE, cards=cards,
        )  # fmt: skip
        match scheduled_admission(
            request, view, kind=WorkloadKind.SERVICE, recovery=RecoveryMode.NEVER,
            recovery_after=timedelta(minutes=5), model_path=lambda m: f"/models/{m}", now=NOW,
        ):  # fmt: skip
            case Success(a):
                cards = cards.reserve(a.placement.reservation).unwrap()
                admitted += 1
            case Failure(_):
                pass
    cpu = time.process_time() - cpu
    return made - started, time.perf_counter() - made, cpu, admitted


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--cards", type=int, default=8)
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs per size; the fastest counts, as timeit's"
    )
    args = parser.parse_args()
    n = args.decisions
    costs: dict[int, float] = {}
    for machines in args.machines:
        fleet = fleet_of(machines, args.cards)
        # The fastest run counts: this shared machine's speed varies by half from one run to the
        # next, so the slower runs measure its noise, not the code.
        runs = sorted((decide_all(fleet, n) for _ in range(args.repeat)), key=lambda r: r[2])
        made, seconds, cpu, admitted = runs[0]  # the others met more of the machine's noise
        costs[machines] = cpu / n
        median = statistics.median(r[2] for r in runs)
        print(
            f"{machines:5d} machines x {args.cards} cards: {n} decisions ({admitted} admitted); "
            f"the index made once in {made * 1e3:.1f} ms, the decisions in {seconds:.3f} s "
            f"elapsed; both: {n / (made + seconds):,.0f} per second elapsed, {n / cpu:,.0f} "
            f"per second of CPU ({cpu / n * 1e3:.3f} ms each; the fastest of {args.repeat} "
            f"runs, their median {n / median:,.0f} per second)",
            flush=True,
        )
    largest, smallest = max(costs), min(costs)
    rate = 1 / costs[largest]
    print(
        f"\ngoals (ADR 0018), on the CPU time of one core (index made included):\n"
        f"   at least {GOAL_PER_S:,.0f} decisions/s at {largest} machines: "
        f"{'met' if rate >= GOAL_PER_S else 'NOT met'} ({rate:,.0f}/s, "
        f"{rate / GOAL_PER_S:.3f}x the goal)"
    )
    if largest != smallest:
        growth = costs[largest] / costs[smallest]
        print(
            f"   cost per decision from {smallest} to {largest} machines grows at most "
            f"{GOAL_GROWTH:g}x: {'met' if growth <= GOAL_GROWTH else 'NOT met'} ({growth:.1f}x)"
        )


if __name__ == "__main__":
    main()
