"""A row of ``nodeau ps``, on either plane: in a module of its own, so that listing
workloads imports the one view it prints and not every command's.
"""

from __future__ import annotations

from datetime import datetime

from attrs import frozen

__all__ = ["WorkloadView"]


@frozen(kw_only=True)
class WorkloadView:
    """One row of ``nodeau ps``: a workload holding a card (or, on a fleet, asking for one)."""

    name: str
    kind: str  # "service" or "batch"
    model: str
    machine: str | None
    gpu: str | None
    simulated: bool
    state: str
    since: datetime | None
    endpoint: str | None  # the OpenAI-compatible base URL a client uses
    sentence: str
    on_cpu: bool = False  # asked with --cpu: its card is held, its model runs on the CPU
    # every card it holds, ``gpu`` first, in slot order: more than one when it is split
    cards: tuple[str, ...] = ()

    @property
    def every_card(self) -> tuple[str, ...]:
        """Every card it holds (``gpu`` alone when ``cards`` is not given)."""
        return self.cards or ((self.gpu,) if self.gpu else ())
