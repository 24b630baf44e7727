"""The text of ``nodeau service explain`` and ``nodeau placement explain``.

Every figure is in bytes with its GiB reading, and says whether it was
estimated or measured; a simulated card says it is simulated.
"""

from __future__ import annotations

from nodeau.apps.cli.render import size, table
from nodeau.domain.memory import Prediction
from nodeau.ports.state import Admission


def admission_lines(admission: Admission, simulated: bool) -> list[str]:
    admitted = admission.admitted
    request = admitted.request
    lines = [
        f"{request.workload}: admitted at {admission.decided_at:%Y-%m-%d %H:%M:%S} UTC "
        f"({request.model}, artifact {request.artifact_id[:12]}, {request.config.key()})",
    ]
    if simulated:
        lines.append("hardware: SIMULATED cards; the model runs on the CPU")
    elif admission.record.workload.on_cpu:
        lines.append(
            "hardware: the model runs on the CPU, as --cpu asked; the card below is held for it"
        )
    for gpu_model, prediction in admitted.predictions:
        lines.append(f"predicted peak on {gpu_model} ({prediction.source.value}):")
        lines.extend(terms_lines(prediction))
    p = admission.placement
    if p.more:
        lines.append(
            f"no one card holds it: split by layers across {len(p.reservations)} cards "
            f"(--tensor-split {','.join(map(str, p.counts))}), each card's predicted share:"
        )
        for reservation, count, share in zip(p.reservations, p.counts, p.shares, strict=True):
            lines.append(f"  {reservation.gpu_uuid}, {count} slot(s) ({share.source.value}):")
            lines.extend("  " + line for line in terms_lines(share))
    counts = admitted.counts
    if len(admitted.cards) < counts.cards:  # a large fleet: the best candidates were kept
        lines.append(
            f"cards: {counts.cards:,} in the fleet: {counts.accepted:,} accepted, "
            f"{counts.held:,} held, {counts.too_small:,} too small, {counts.no_verified_copy:,} "
            f"without a verified copy; the decision kept the {len(admitted.cards)} best "
            "candidates, shown here"
        )
    lines.append("cards (free memory according to the reservation ledger, not a card reading):")
    card_rows = [
        (
            c.machine,
            c.gpu_uuid,
            size(c.total_bytes),
            size(c.reserved_bytes),
            size(c.free_bytes),
            size(c.needed_bytes),
            "accepted" if c.rejection is None else c.rejection.value,
        )
        for c in admitted.cards
    ]
    lines.extend(
        "  " + line
        for line in table(
            ("MACHINE", "GPU", "TOTAL", "RESERVED", "FREE", "NEEDED", "VERDICT"), card_rows
        ).splitlines()
    )
    return lines


def terms_lines(prediction: Prediction) -> list[str]:
    """A prediction's terms and total, one table indented under its heading."""
    rows = [
        (t.name, f"{t.bytes:,}", size(t.bytes), t.source.value, t.basis) for t in prediction.terms
    ]
    total = prediction.total_bytes
    rows.append(("total", f"{total:,}", size(total), prediction.source.value, ""))
    return [
        "  " + line for line in table(("TERM", "BYTES", "", "SOURCE", "BASIS"), rows).splitlines()
    ]


def placement_lines(admission: Admission) -> list[str]:
    p = admission.placement
    shown = (
        "candidates, best first:"
        if len(p.ranked) == p.candidates
        else f"candidates, best first (the first {len(p.ranked)} of {p.candidates:,}):"
    )
    cards = ", ".join(r.gpu_uuid for r in p.reservations)
    lines = [
        f"{p.workload}: placed on {p.machine}, {cards} (policy {p.policy.value})",
        f"why: {p.why}",
        *(
            f"reservation: {r.bytes:,} bytes ({size(r.bytes)}) on {r.gpu_uuid}"
            for r in p.reservations
        ),
    ]
    if not p.more:  # a split ranks no candidates: the fewest cards that hold it are chosen
        lines.append(shown)
        lines.extend(
            f"  {r.machine} {r.gpu_uuid}: {r.policy.value}, machine holds {r.machine_held} of "
            f"{r.machine_cards} cards, score {float(r.score):.2f}, card {size(r.total_bytes)}"
            for r in p.ranked
        )
    if p.excluded:
        lines.append("not candidates:")
        lines.extend(f"  {m}: {why}" for m, why in p.excluded)
    return lines
