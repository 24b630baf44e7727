"""``nodeau organisation install`` and ``remove`` on one machine, in process, through the CLI's
composition root with the test's keys: the accepted path (a plan with organisation limits)
that an installed ``nodeau``, trusting only its compiled-in keys, cannot be given."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nodeau.apps.cli import bootstrap
from nodeau.apps.planes.plane import Plane
from nodeau.domain.plans import PlanName
from nodeau.ports.organisation import NotAllowed, OrganisationError
from tests.support.builders.entitlements import document, trusted


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("NODEAU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NODEAU_PLANE", "machine")
    monkeypatch.setenv("NODEAU_MACHINE", "testbox")
    yield tmp_path / "home"


def on_team_plan() -> Plane:
    plane = bootstrap.plane(trusted_keys=trusted())
    now = datetime.now(UTC)
    signed = document(
        plane.plans.in_force().installation_id,
        plan=PlanName.TEAM,
        not_before=now - timedelta(days=1),
        not_after=now + timedelta(days=90),
        issued_at=now - timedelta(days=1),
    )
    assert plane.plans.install(signed, "team.json").installed
    return plane


def test_an_admin_installs_a_policy_on_a_team_plan_and_it_binds_at_once(home: Path) -> None:
    plane = on_team_plan()
    me = plane.organisation.view().user
    policy = {"roles": {"admin": [me]}, "everyone": "viewer", "contact": "#gpu"}
    said = plane.organisation.install(json.dumps(policy).encode(), "policy.json")
    kept = home / "organisation.json"
    assert said == f"Installed the organisation's policy from policy.json, kept in {kept}."
    shown = plane.organisation.view()
    assert (shown.configured, shown.role, shown.roles["admin"]) == (True, "admin", (me,))

    # a policy that makes its installer a viewer is installed, and says what it means
    demote = {"everyone": "viewer"}
    said = plane.organisation.install(json.dumps(demote).encode(), "demote.json")
    assert said.endswith(
        f"note: under it you ({me}) are viewer, and only an admin can change it again."
    )
    with pytest.raises(NotAllowed) as refused:
        plane.organisation.install(json.dumps(policy).encode(), "policy.json")
    assert refused.value.refusal.code.value == "permission.role-may-not"
    with pytest.raises(NotAllowed):
        plane.organisation.remove()
    with pytest.raises(NotAllowed):
        plane.plans.remove()  # installing or removing a plan is an admin's action too
    assert plane.organisation.view().role == "viewer"


def test_a_document_that_does_not_read_is_refused_and_replaces_nothing(home: Path) -> None:
    plane = on_team_plan()
    plane.organisation.install(b'{"everyone": "admin"}', "ok.json")
    with pytest.raises(OrganisationError, match="everyone: 'root' is not a role"):
        plane.organisation.install(b'{"everyone": "root"}', "bad.json")
    assert plane.organisation.view().everyone == "admin"
    assert plane.organisation.remove().startswith("Removed the organisation's policy")
    assert plane.organisation.view().configured is False
    assert plane.organisation.remove().startswith("No organisation policy is installed")
