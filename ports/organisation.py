"""Port of the organisation's policy: where a plane keeps the document that configures
roles, limits and quotas (one machine: a file under NODEAU_HOME; a fleet: a ConfigMap).

Why it is so: docs/adr/decisions/ports.md (organisation.py).
"""

from __future__ import annotations

from typing import Protocol

from nodeau.domain.organisation import Organisation, Requester
from nodeau.domain.refusals import Refusal
from nodeau.ports.errors import NodeauError


class OrganisationError(NodeauError):
    """The organisation's policy could not be read, written or accepted; one line."""


class NotAllowed(NodeauError):
    """A request refused by the organisation's policy or the plan, before anything changed:
    its kind, its code and its sentence, as every refusal is printed."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(
            f"refused ({refusal.kind.value}): {refusal.code.value}: {refusal.sentence}"
        )
        self.refusal = refusal


class Identity(Protocol):
    """Who is asking, as the plane knows them (one machine: the local user and their
    groups; a fleet: the Kubernetes user of the credentials, as the API server says)."""

    def requester(self) -> Requester:
        """The person asking now."""
        ...


class OrganisationPolicy(Protocol):
    """The organisation's policy document of one plane."""

    @property
    def where(self) -> str:
        """Where the document is (or would be) kept, for a person."""
        ...

    def read(self) -> Organisation:
        """The policy in force (``Organisation.none()`` when none is installed)."""
        ...

    def install(self, document: bytes) -> Organisation:
        """Keep ``document`` once it reads (else ``OrganisationError``, nothing replaced)."""
        ...

    def remove(self) -> bool:
        """Remove the installed document; whether there was one."""
        ...
