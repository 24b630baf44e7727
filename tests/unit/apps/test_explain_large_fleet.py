"""``nodeau service explain`` and ``placement explain`` on a fleet larger than a decision keeps.

A decision on a large fleet keeps the best candidates and the counts of every verdict
(domain/free_cards.py); the explanation says so, with the counts, instead of listing cards
it does not have.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodeau.apps.cli.explain import admission_lines, placement_lines
from nodeau.domain.free_cards import SHOWN
from nodeau.domain.memory import GIB
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.reservations import Ledger, Reservation, reserve
from nodeau.domain.scheduling import FleetView, scheduled_admission
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from tests.support.builders.fleets import flat, fleet, gpu, machine, request

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_large_fleets_explanation_counts_every_card_and_shows_the_best() -> None:
    f = fleet(
        *(machine(f"m{i}", *(gpu(f"GPU-{i}-{j}", 80) for j in range(4))) for i in range(6)),
        machine("small", gpu("GPU-small", 16)),
    )
    ledger = Ledger()
    for uuid, name in (("GPU-2-0", "m2"), ("GPU-2-1", "m2"), ("GPU-4-3", "m4")):
        located = f.locate(uuid)
        assert located is not None
        taken = Reservation(workload=f"h-{uuid}", machine=name, gpu_uuid=uuid, bytes=GIB)
        ledger = reserve(ledger, taken, located[1]).unwrap()
    view = FleetView(
        fleet=f,
        ledger=ledger,
        settings=SchedulingSettings(),
        excluded=(("m5", "drained"),),
        verified_on=frozenset({"m0", "m1", "m2", "m3", "m5", "small"}),
        predict=flat(30 * GIB),
        plan=ENTERPRISE,
    )
    admission = scheduled_admission(
        request(),
        view,
        kind=WorkloadKind.SERVICE,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=5),
        model_path=lambda m: f"/models/{m}",
        now=NOW,
    ).unwrap()
    lines = admission_lines(admission, simulated=False)
    # 25 cards: 1 too small, 3 held, m4's other 3 free without a copy, 18 accepted (m5's
    # 4 among them: drained is placement's, not admission's), so 14 candidates
    assert (
        "cards: 25 in the fleet: 18 accepted, 3 held, 1 too small, 3 without a verified copy; "
        f"the decision kept the {SHOWN} best candidates, shown here"
    ) in lines
    shown = [line for line in lines if line.startswith("  m")]
    assert len(shown) == SHOWN
    assert shown[0].split()[:2] == ["m2", "GPU-2-2"]  # pack: m2 holds 2 of its 4 cards
    placed = placement_lines(admission)
    assert placed[0] == "svc: placed on m2, GPU-2-2 (policy pack)"
    assert "candidates, best first (the first 8 of 14):" in placed
    assert placed[1].endswith("13 other candidate(s) ranked below")
    assert "  m5: drained" in placed
