"""Bootstrap tokens: how a new machine is invited into the fleet, the way kubeadm does it.

Why it is so: docs/adr/decisions/adapters-kube.md (bootstrap_tokens.py).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client

from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors
from nodeau.ports.join_tokens import BootstrapToken, TokenError

__all__ = ["BootstrapToken", "KubeBootstrapTokens", "TokenError"]

SYSTEM_NAMESPACE = "kube-system"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
NODE_GROUP = "system:bootstrappers:kubeadm:default-node-token"
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
ID_LENGTH, SECRET_LENGTH = 6, 16
DEFAULT_TTL = timedelta(hours=24)


def new_token() -> BootstrapToken:
    """A fresh token from the operating system's random source."""

    def draw(n: int) -> str:
        return "".join(secrets.choice(ALPHABET) for _ in range(n))

    return BootstrapToken(id=draw(ID_LENGTH), secret=draw(SECRET_LENGTH))


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's pin of a CA certificate: sha256 of its DER SubjectPublicKeyInfo."""
    certificate = x509.load_pem_x509_certificates(ca_pem)[0]
    spki = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def cluster_ca(api: Any) -> bytes:
    """The PEM of the CA the client trusts for this cluster (the kubeconfig's)."""
    path = getattr(api.configuration, "ssl_ca_cert", None)
    if not path:
        raise TokenError(
            "the kubeconfig names no certificate authority for this cluster, so the new "
            "machine could not pin it; use a kubeconfig with certificate-authority-data"
        )
    try:
        with open(path, "rb") as held:
            return held.read()
    except OSError as exc:
        raise TokenError(f"cannot read the cluster's certificate authority {path}: {exc}") from exc


def token_secret(token: BootstrapToken, expires: datetime, description: str) -> Any:
    """The Secret that makes a bootstrap token, as kubeadm writes it."""
    data = {
        "token-id": token.id,
        "token-secret": token.secret,
        "expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": NODE_GROUP,
        "description": description,
    }
    return client.V1Secret(
        metadata=client.V1ObjectMeta(name=SECRET_PREFIX + token.id, namespace=SYSTEM_NAMESPACE),
        type=SECRET_TYPE,
        data={k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    )


def create_token(
    api: Any, *, now: datetime, ttl: timedelta = DEFAULT_TTL, description: str = ""
) -> tuple[BootstrapToken, datetime]:
    """Create a bootstrap token in the cluster; the token and when it expires.

    A clash with an existing token id (one chance in two billion) draws again.
    """
    if ttl <= timedelta(0):
        raise TokenError("--ttl must be positive")
    expires = (now + ttl).replace(microsecond=0)
    core: Any = client.CoreV1Api(api)
    for _ in range(5):
        token = new_token()
        try:
            with api_errors(f"create bootstrap token {token.id}"):
                core.create_namespaced_secret(
                    SYSTEM_NAMESPACE,
                    token_secret(token, expires, description),
                    _request_timeout=REQUEST_TIMEOUT,
                )
        except Conflict:
            continue
        return token, expires
    raise TokenError("five fresh bootstrap token ids all clashed with existing ones; try again")


class KubeBootstrapTokens:
    """``ports.join_tokens.BootstrapTokens``: kubeadm's bootstrap-token Secrets in kube-system."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def create(
        self, *, now: datetime, ttl: timedelta, description: str
    ) -> tuple[BootstrapToken, datetime]:
        return create_token(self._api, now=now, ttl=ttl, description=description)

    def ca_pin(self) -> str:
        return ca_cert_hash(cluster_ca(self._api))
