"""Joining a machine to a fleet: the bootstrap token a person is given, the CA pin they
type, and the port that makes a token and gives the pin.

Why it is so: docs/adr/decisions/ports.md (cluster.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Protocol

from attrs import frozen
from returns.result import Failure, Result, Success

from nodeau.ports.cluster import ClusterError


class TokenError(ClusterError):
    """The cluster would not take a bootstrap token."""


@frozen(kw_only=True)
class BootstrapToken:
    """A bootstrap token: its public id and its secret half (6 and 16 of [a-z0-9])."""

    id: str
    secret: str

    def __attrs_post_init__(self) -> None:
        alphabet = set("abcdefghijklmnopqrstuvwxyz0123456789")
        shaped = len(self.id) == 6 and len(self.secret) == 16
        if not shaped or not set(self.id + self.secret) <= alphabet:
            raise ValueError("a bootstrap token is 6 and 16 characters of [a-z0-9]")

    @property
    def text(self) -> str:
        """The token as kubeadm takes it: ``<id>.<secret>``."""
        return f"{self.id}.{self.secret}"


TOKEN_SHAPE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")


HASH_SHAPE = re.compile(r"^sha256:([0-9a-f]{64})$")


def parse_token(text: str) -> Result[BootstrapToken, str]:
    """A token a person typed, or the sentence saying what shape it must have."""
    shape = TOKEN_SHAPE.match(text.strip())
    if shape is None:
        return Failure(
            "--token must look like abcdef.0123456789abcdef "
            "(6 and 16 characters of a-z and 0-9, joined by a dot)"
        )
    return Success(BootstrapToken(id=shape.group(1), secret=shape.group(2)))


def parse_ca_hash(text: str) -> Result[str, str]:
    """A CA pin a person typed (``sha256:<64 hex>``), or the sentence saying its shape."""
    cleaned = text.strip().lower()
    if HASH_SHAPE.match(cleaned) is None:
        return Failure(
            "--ca-cert-hash must be sha256: followed by 64 hex digits "
            "(as nodeau fleet invite prints it)"
        )
    return Success(cleaned)


class BootstrapTokens(Protocol):
    """Tokens that let a new machine join the cluster."""

    def create(
        self, *, now: datetime, ttl: timedelta, description: str
    ) -> tuple[BootstrapToken, datetime]:
        """A fresh token valid for ``ttl`` from ``now``, and when it expires; TokenError when
        the cluster will not take one."""
        ...

    def ca_pin(self) -> str:
        """The pin (``sha256:HEX``) of the certificate authority this client trusts."""
        ...
