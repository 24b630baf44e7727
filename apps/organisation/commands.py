"""What ``nodeau organisation`` asks of a plane (``OrganisationCommands``) and the views it
prints; one implementation serves both planes (``apps.organisation.policy``)."""

from __future__ import annotations

from typing import Protocol

from attrs import frozen


@frozen(kw_only=True)
class QuotaView:
    """One quota of ``nodeau organisation``: whose, its bounds, what is spent now."""

    subject: str  # "user NAME" or "team NAME"
    max_gpus_held: int | None
    max_workloads: int | None
    gpus_held: int
    workloads: int


@frozen(kw_only=True)
class OrganisationView:
    """``nodeau organisation``: the policy in force, where it is kept, and who is asking."""

    plane: str
    where: str
    configured: bool
    user: str
    groups: tuple[str, ...]
    role: str  # the asking person's role
    roles: dict[str, tuple[str, ...]]  # role -> entries ("NAME" or "group:NAME")
    everyone: str
    max_context_tokens: int | None
    max_model_bytes: int | None
    allowed_models: tuple[str, ...] | None  # None: any model
    allowed_machines: tuple[str, ...] | None  # None: every machine
    quotas: tuple[QuotaView, ...]
    contact: str | None


class OrganisationCommands(Protocol):
    """The organisation's policy on one plane."""

    def view(self) -> OrganisationView:
        """The organisation's policy in force and who is asking."""
        ...

    def install(self, document: bytes, source: str) -> str:
        """Install a policy document (an admin's, on a plan that includes it); what was done."""
        ...

    def remove(self) -> str:
        """Remove the policy (an admin's); what was done."""
        ...
