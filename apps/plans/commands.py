"""What ``nodeau plan`` asks of a plane (``PlanCommands``) and the views it prints; one
implementation serves both planes (``apps.plans.entitlement``)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from attrs import frozen


@frozen(kw_only=True)
class PlanView:
    """``nodeau plan``: the terms in force, where they came from, why, and the clock."""

    plane: str
    installation_id: str  # what a vendor issues an entitlement for
    plan: str  # "home", "pro", "team", "enterprise"
    accepted: bool  # an entitlement's terms are in force (else the Home plan's)
    reason: str  # "accepted", or why the Home plan applies ("none-present", "expired", ...)
    sentence: str
    detail: str | None  # what was wrong with the document, when it says
    warning: str | None  # accepted, and expiring soon or in its grace
    source: str | None  # where the installed document is kept; None when none is installed
    key_id: str | None  # the key the document names
    features: tuple[str, ...]
    max_machines: int | None  # None: unbounded
    max_gpus: int | None
    protections: tuple[str, ...]  # identical on every plan
    not_before: datetime | None  # from a document whose signature verified
    expires_at: datetime | None
    grace_until: datetime | None  # new decisions keep its terms until then
    clock: datetime  # the time this was decided at
    clock_anchor: datetime | None  # the newest moment this installation has seen
    clock_moved_back: bool


@frozen(kw_only=True)
class PlanInstall:
    """``nodeau plan install``: whether the document was installed, and what it gives."""

    installed: bool
    sentence: str
    plan: PlanView  # installed: the plan in force now; refused: what the document gives


class PlanCommands(Protocol):
    """The plan of one plane: the entitlement in force, installing one, removing it."""

    def in_force(self, *, advance: bool = True) -> PlanView:
        """The plan in force: the installed entitlement's terms if it can be accepted, else
        the Home plan's with the reason; advances the clock anchor unless ``advance`` is
        False (a reader that only shows it)."""
        ...

    def install(self, document: bytes, source: str) -> PlanInstall:
        """Keep ``document`` (read from ``source``) as this plane's entitlement if it can be
        accepted now; a document that cannot is refused with its reason and nothing is
        replaced."""
        ...

    def remove(self) -> str:
        """Remove the installed entitlement (new decisions use the Home plan; nothing
        serving stops); what was done."""
        ...
