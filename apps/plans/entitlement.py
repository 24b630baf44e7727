"""``nodeau plan``: the plan in force, installing an entitlement, removing it; both planes.

Why it is so: docs/adr/decisions/apps-planes.md (plans/entitlement.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from attrs import frozen

from nodeau.apps.plans.commands import PlanInstall, PlanView
from nodeau.domain.entitlements import (
    TIMING,
    EntitlementStatus,
    Timing,
    Verification,
    clock_anchor,
    clock_moved_back,
    grace_end,
    verified_terms,
)
from nodeau.domain.plans import plan_title
from nodeau.ports.entitlements import EntitlementStore, EntitlementVerifier, StoredEntitlement

UNCHANGED = "nothing was replaced, and the plan in force is unchanged"


def plan_view(
    plane: str,
    kept: StoredEntitlement,
    verification: Verification | None,
    status: EntitlementStatus,
    now: datetime,
    source: str | None,
    timing: Timing = TIMING,
) -> PlanView:
    """What ``nodeau plan`` shows of ``status``, decided at ``now`` over what is kept."""
    entitlement = None if verification is None else verification.entitlement
    anchor = clock_anchor(kept.anchor, entitlement)
    terms = status.terms
    return PlanView(
        plane=plane,
        installation_id=kept.installation_id,
        plan=terms.name.value,
        accepted=status.accepted,
        reason=status.reason.value,
        sentence=status.sentence,
        detail=None if verification is None else verification.detail,
        warning=status.warning,
        source=source,
        key_id=None if verification is None else verification.key_id,
        features=tuple(sorted(f.value for f in terms.features)),
        max_machines=terms.max_machines,
        max_gpus=terms.max_gpus,
        protections=tuple(sorted(p.value for p in status.protections)),
        not_before=None if entitlement is None else entitlement.not_before,
        expires_at=None if entitlement is None else entitlement.not_after,
        grace_until=None if entitlement is None else grace_end(entitlement, timing),
        clock=now,
        clock_anchor=anchor,
        clock_moved_back=clock_moved_back(now, anchor, timing.clock_tolerance),
    )


def kept_terms(
    kept: StoredEntitlement | None, verifier: EntitlementVerifier, now: datetime
) -> EntitlementStatus:
    """The terms new decisions use now, given what is kept (None: nothing, the Home plan)."""
    if kept is None:
        return verified_terms(None, "", now)
    verification = None if kept.document is None else verifier.verify(kept.document)
    return verified_terms(verification, kept.installation_id, now, anchor=kept.anchor)


def status_in_force(
    store: EntitlementStore, verifier: EntitlementVerifier, now: datetime
) -> EntitlementStatus:
    """The terms new decisions use now, over what the store keeps; nothing is written (a
    decision reads the plan; only ``nodeau plan``'s commands advance the clock anchor)."""
    return kept_terms(store.read(), verifier, now)


def plan_in_force(
    plane: str,
    store: EntitlementStore,
    verifier: EntitlementVerifier,
    now: datetime,
    *,
    advance: bool = True,
) -> PlanView:
    """The plan in force now over what the store keeps; the anchor is advanced to now
    unless ``advance`` is False (a reader that only shows it: the dashboard's poll)."""
    kept = store.read()
    verification = None if kept.document is None else verifier.verify(kept.document)
    status = verified_terms(verification, kept.installation_id, now, anchor=kept.anchor)
    if advance:
        store.advance_anchor(now)
    source = None if kept.document is None else kept.where
    return plan_view(plane, kept, verification, status, now, source)


def install(
    plane: str,
    store: EntitlementStore,
    verifier: EntitlementVerifier,
    document: bytes,
    source: str,
    now: datetime,
) -> PlanInstall:
    """Keep ``document`` if it can be accepted now; else refuse it, saying why."""
    kept = store.read()
    verification = verifier.verify(document)
    status = verified_terms(verification, kept.installation_id, now, anchor=kept.anchor)
    if not status.accepted:
        detail = "" if verification.detail is None else f" ({verification.detail})"
        store.advance_anchor(now)
        return PlanInstall(
            installed=False,
            sentence=f"{source} was not installed: {status.cause}{detail}; {UNCHANGED}.",
            plan=plan_view(plane, kept, verification, status, now, source),
        )
    store.install(document, now)
    title = plan_title(status.terms.name)
    return PlanInstall(
        installed=True,
        sentence=f"Installed the {title} entitlement from {source}, kept in {kept.where}.",
        plan=plan_view(plane, kept, verification, status, now, kept.where),
    )


def remove(store: EntitlementStore, now: datetime) -> str:
    """Remove the installed document; what was done."""
    where = store.read().where
    if not store.remove(now):
        return f"No entitlement is installed ({where}); nothing was removed."
    return (
        f"Removed the entitlement from {where}: new decisions use the free Home plan;"
        " nothing already serving is stopped."
    )


@frozen(kw_only=True)
class Plans:
    """``PlanCommands`` on either plane: ``entitlements`` gives its store and verifier
    (each plane keeps the entitlement where it keeps its state), ``permit`` refuses a
    person who may not install or remove one."""

    _plane: str
    _entitlements: Callable[[], tuple[EntitlementStore, EntitlementVerifier]]
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def in_force(self, *, advance: bool = True) -> PlanView:
        return plan_in_force(self._plane, *self._entitlements(), self._clock(), advance=advance)

    def install(self, document: bytes, source: str) -> PlanInstall:
        self._permit("install-plan")
        return install(self._plane, *self._entitlements(), document, source, self._clock())

    def remove(self) -> str:
        self._permit("install-plan")
        return remove(self._entitlements()[0], self._clock())
