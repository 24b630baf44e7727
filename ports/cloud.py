"""Ports of Nodeau Cloud: the service Nodeau reaches out to, and what it keeps of it here.

Why it is so: docs/adr/decisions/ports.md (cloud.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from attrs import frozen

from nodeau.domain.cloud import (
    Association,
    OperationRecord,
    OutboundCall,
    RemoteOperation,
    SignInState,
)
from nodeau.ports.errors import NodeauError


class CloudError(NodeauError):
    """A call to Nodeau Cloud did not do what was asked; one line naming where and why."""


class CloudUnavailable(CloudError):
    """No usable answer came: the cloud is down, timed out, or answered a server error."""


class CloudRefused(CloudError):
    """The cloud answered and refused (4xx): the association may have been revoked."""


class CloudStateError(NodeauError):
    """What is kept of the cloud on this machine could not be read or written."""


@frozen(kw_only=True)
class DeviceCode:
    """A sign-in started: what the person opens and types, and how the command polls."""

    device_code: str  # secret: only the poll sends it back
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: timedelta
    interval: timedelta


@frozen(kw_only=True)
class SignInPoll:
    """One poll's answer; when approved, the account, the credential and the entitlement."""

    state: SignInState
    account: str | None = None
    installation_id: str | None = None  # the installation the cloud registered
    token: str | None = None
    entitlement: bytes | None = None  # a signed document, verified here like any other


@frozen(kw_only=True)
class Installation:
    """What sign-in tells the cloud about this installation."""

    installation_id: str
    machine: str
    plane: str  # "machine" or "kubernetes"
    version: str  # Nodeau's version


class NodeauCloud(Protocol):
    """Nodeau Cloud's API at one base URL, reached from here; each method is one call."""

    def start_sign_in(self, installation: Installation) -> DeviceCode:
        """Ask for a device code for ``installation``."""
        ...

    def poll_sign_in(self, code: DeviceCode) -> SignInPoll:
        """Ask once whether the person approved the sign-in."""
        ...

    def send_report(self, association: Association, report: Mapping[str, object]) -> None:
        """Send one metadata report (built by ``domain.cloud.metadata_report``)."""
        ...

    def operations(self, association: Association) -> tuple[RemoteOperation, ...]:
        """The operations waiting for this installation."""
        ...

    def send_outcome(self, association: Association, record: OperationRecord) -> None:
        """Say what became of one operation."""
        ...

    def disconnect(self, association: Association) -> None:
        """Tell the cloud this installation no longer reaches out."""
        ...


class CloudState(Protocol):
    """What this machine keeps of Nodeau Cloud, under the user's NODEAU_HOME."""

    @property
    def where(self) -> str:
        """Where it is kept, for a person."""
        ...

    def association(self) -> Association | None:
        """The association, or None when not connected."""
        ...

    def keep(self, association: Association) -> None:
        """Keep ``association`` whole in place of any other."""
        ...

    def forget(self) -> bool:
        """Forget the association (the records stay); whether there was one."""
        ...

    def record_call(self, call: OutboundCall) -> None:
        """Append one outbound call to the record."""
        ...

    def calls(self) -> tuple[OutboundCall, ...]:
        """Every outbound call recorded, oldest first."""
        ...

    def record_operation(self, record: OperationRecord) -> None:
        """Append what became of one operation the cloud asked for."""
        ...

    def operations(self) -> tuple[OperationRecord, ...]:
        """Every operation recorded, oldest first."""
        ...


class Reporter(Protocol):
    """The fleet's reporter to the cloud, as a background process (``connect --fleet``
    starts it, ``disconnect`` stops it, ``status`` finds it); ``folder`` keeps its pid."""

    def start(self, home: Path, folder: Path) -> int:
        """Start it (stopping one already running first); its pid."""
        ...

    def stop(self, folder: Path) -> bool:
        """Stop it; whether one was running."""
        ...

    def running(self, folder: Path) -> int | None:
        """Its pid while it runs; None otherwise."""
        ...
