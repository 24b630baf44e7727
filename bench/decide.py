"""The pure domain's admission and placement at fleet sizes, on one core.

Usage::

    .venv/bin/python bench/decide.py [--machines 100 1000] [--cards 8] [--decisions 200]

For each fleet size it builds the fleet (machines x cards, each card 80 GiB, one GPU model),
then takes ``--decisions`` decisions one after another exactly as the controller takes them:
``scheduled_admission`` (admission's arithmetic over every card, the plan's scope, placement's
ranking) over the ledger as it stands, each admitted workload's reservation then added with
``reserve`` (so the ledger grows as the fleet fills: decision k sees k-1 cards held). The
prediction is the domain's own estimate of a real shape (Llama-3-8B-like, 8k context), the
same for every card. Nothing but the domain runs: no I/O, no store.

It prints decisions per second at each size, the cost per decision, the growth of that cost
from the smallest size to the largest, and their ratios to the goals of issue 14: at least
5,000 decisions per second at 1,000 machines x 8 cards, and a cost per decision that grows by
no more than 12x from 100 to 1,000 machines. No assertion: the figures are the result.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from returns.result import Failure, Success

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodeau.domain.admission import AdmissionRequest  # noqa: E402
from nodeau.domain.hardware import Fleet, Gpu, Machine  # noqa: E402
from nodeau.domain.memory import (  # noqa: E402
    GIB,
    Allowances,
    Architecture,
    MeasuredTable,
    RuntimeConfig,
    predictor,
)
from nodeau.domain.placement import SchedulingSettings  # noqa: E402
from nodeau.domain.plans import ENTERPRISE  # noqa: E402
from nodeau.domain.reservations import Ledger, reserve  # noqa: E402
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


def decide_all(fleet: Fleet, decisions: int) -> tuple[float, int]:
    """Seconds for ``decisions`` decisions in a row over a filling ledger; how many admitted."""
    config = RuntimeConfig(context_tokens=8192)
    predict = predictor(
        arch=llama_8b(), artifact_id=ARTIFACT, artifact_bytes=5 * GIB, config=config,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    gpus = {g.uuid: g for _m, g in fleet.gpus}
    verified = frozenset(m.name for m in fleet.machines)
    ledger = Ledger()
    admitted = 0
    started = time.perf_counter()
    for k in range(decisions):
        request = AdmissionRequest(
            workload=f"w{k}", model="llama-8b", artifact_id=ARTIFACT, config=config
        )
        view = FleetView(
            fleet=fleet, ledger=ledger, settings=SchedulingSettings(), excluded=(),
            verified_on=verified, predict=predict, plan=ENTERPRISE,
        )  # fmt: skip
        match scheduled_admission(
            request, view, kind=WorkloadKind.SERVICE, recovery=RecoveryMode.NEVER,
            recovery_after=timedelta(minutes=5), model_path=lambda m: f"/models/{m}", now=NOW,
        ):  # fmt: skip
            case Success(a):
                placed = a.placement.reservation
                ledger = reserve(ledger, placed, gpus[placed.gpu_uuid]).unwrap()
                admitted += 1
            case Failure(_):
                pass
    return time.perf_counter() - started, admitted


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--cards", type=int, default=8)
    parser.add_argument("--decisions", type=int, default=200)
    args = parser.parse_args()
    costs: dict[int, float] = {}
    for machines in args.machines:
        fleet = fleet_of(machines, args.cards)
        seconds, admitted = decide_all(fleet, args.decisions)
        costs[machines] = seconds / args.decisions
        rate = args.decisions / seconds
        print(f"{machines:5d} machines x {args.cards} cards: {args.decisions} decisions "
              f"({admitted} admitted) in {seconds:.2f} s: {rate:,.0f} per second, "
              f"{costs[machines] * 1e3:.3f} ms each", flush=True)  # fmt: skip
    largest, smallest = max(costs), min(costs)
    rate = 1 / costs[largest]
    print(f"\ngoals (issue 14):\n   at least {GOAL_PER_S:,.0f} decisions/s at {largest} machines: "
          f"{'met' if rate >= GOAL_PER_S else 'NOT met'} ({rate:,.0f}/s, "
          f"{rate / GOAL_PER_S:.3f}x the goal)")  # fmt: skip
    if largest != smallest:
        growth = costs[largest] / costs[smallest]
        print(f"   cost per decision from {smallest} to {largest} machines grows at most "
              f"{GOAL_GROWTH:g}x: {'met' if growth <= GOAL_GROWTH else 'NOT met'} "
              f"({growth:.1f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
