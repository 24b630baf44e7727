"""The text of ``nodeau model qualify``: each capability's outcome with its evidence, the
memory each server took and how it was read, and what the model now claims."""

from __future__ import annotations

from nodeau.apps.cli.render import size
from nodeau.apps.qualification.commands import QualificationView

EVIDENCE_CHARS = 160  # per line of evidence in the text; --json has all of it


def qualification_lines(view: QualificationView) -> list[str]:
    """What a person reads of one qualification run."""
    lines = [
        f"qualified {view.model} (artifact {view.artifact[:12]}) on {view.card}",
        f"  runtime {view.runtime}, context {view.context_tokens} tokens, "
        f"{view.at:%Y-%m-%d %H:%M:%S %Z}, seed {view.seed}",
    ]
    for p in view.probes:
        lines.append(f"{p.capability:<18} {p.outcome.upper()}: {p.why}")
        if p.asked:
            lines.append(f"  asked:    {_short(p.asked)}")
        if p.answered:
            lines.append(f"  answered: {_short(p.answered)}")
    if view.memory:
        lines.append("memory at its peak (each server qualification started):")
    for m in view.memory:
        kept = "recorded as a measurement" if m.measured else "evidence only, not a card's VRAM"
        lines.append(f"  {m.task}: {size(m.peak_bytes)}, {m.source} ({kept}); {m.config}")
    if not view.memory:
        lines.append(
            "memory: not read (no card's own reading of a model server: a fleet's simulated "
            "cards hold none, and a server that never served, or that no machine's report "
            "named, was not measured); admission keeps using its estimate"
        )
    claims = ", ".join(view.claims) if view.claims else "nothing (no probe passed)"
    lines.append(f"{view.model} now claims: {claims}")
    return lines


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= EVIDENCE_CHARS else one[: EVIDENCE_CHARS - 1] + "…"
