"""The ``OrganisationPolicy`` contract: checks every implementation must pass.

Each check takes a policy with nothing installed and leaves it so. They run against the
file under NODEAU_HOME and the in-memory fake (tests/contract/test_organisation_policy.py)
and against ConfigMap nodeau-organisation (tests/kube/test_organisation_fleet.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from nodeau.domain.limits import Role
from nodeau.domain.organisation import Organisation, Requester, role_of
from nodeau.ports.organisation import OrganisationError, OrganisationPolicy

POLICY = {
    "limits": {"max_context_tokens": 8192, "allowed_machines": ["gpu-a", "gpu-b"]},
    "roles": {"admin": ["alice"], "operator": ["group:ml"]},
    "everyone": "viewer",
    "quotas": {"users": {"bob": {"max_gpus_held": 1}}, "teams": {"ml": {"max_workloads": 4}}},
    "contact": "#gpu-help",
}


def none_installed_reads_as_no_policy(policy: OrganisationPolicy) -> None:
    assert policy.read() == Organisation.none()
    assert policy.remove() is False


def installed_reads_back_and_removes(policy: OrganisationPolicy) -> None:
    installed = policy.install(json.dumps(POLICY).encode())
    assert policy.read() == installed
    assert installed.limits.max_context_tokens == 8192
    assert role_of(installed, Requester(user="carol", groups=frozenset({"ml"}))) is Role.OPERATOR
    assert installed.team_quotas["ml"].max_workloads == 4
    assert installed.contact == "#gpu-help"
    assert policy.remove() is True
    assert policy.read() == Organisation.none()


def a_document_that_does_not_read_replaces_nothing(policy: OrganisationPolicy) -> None:
    policy.install(json.dumps(POLICY).encode())
    kept = policy.read()
    with pytest.raises(OrganisationError, match=r"quotas\.users\['bob'\]\.max_gpus_held"):
        policy.install(b'{"quotas": {"users": {"bob": {"max_gpus_held": -1}}}}')
    assert policy.read() == kept
    policy.remove()


POLICY_CONTRACT: tuple[Callable[[Any], None], ...] = (
    none_installed_reads_as_no_policy,
    installed_reads_back_and_removes,
    a_document_that_does_not_read_replaces_nothing,
)
