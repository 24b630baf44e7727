"""Who is asking on a fleet: the Kubernetes user of the credentials in use, as the API server
itself says (a SelfSubjectReview, authentication.k8s.io/v1), with its groups.

Why it is so: docs/adr/decisions/adapters-kube.md (identity.py).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from nodeau.adapters.kube.client import api_errors
from nodeau.domain.organisation import Requester
from nodeau.ports.cluster import ClusterError

SYSTEM_PREFIX = "system:"


class KubeIdentity:
    """``Identity`` of the credentials ``api`` sends."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def requester(self) -> Requester:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        with api_errors("ask the API server who these credentials are"):
            auth: Any = client.AuthenticationV1Api(self._api)  # Any: a plain dict body
            review = auth.create_self_subject_review(body)
        info = review.status.user_info if review.status is not None else None
        if info is None or not info.username:
            raise ClusterError("the API server did not say who these credentials are")
        groups = frozenset(g for g in info.groups or () if not g.startswith(SYSTEM_PREFIX))
        return Requester(user=info.username, groups=groups)
