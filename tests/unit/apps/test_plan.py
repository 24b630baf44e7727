"""``nodeau plan``, ``plan install``, ``plan remove`` on one machine, in process, through the
CLI's composition root with the test's own keys (``bootstrap.plane(trusted_keys=...)``):
the accepted path an installed ``nodeau`` cannot be given a key for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.plan import NOTE, REFUSED, install_on, plan_lines, show_on
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.planes.plane import Plane
from nodeau.domain.plans import PlanName
from tests.support.builders.entitlements import KEY_ID, NEXT_KEY_ID, document, trusted
from tests.support.clock import Clock

PLAN_KEYS = {
    "plane", "installation_id", "plan", "accepted", "reason", "sentence", "detail", "warning",
    "source", "key_id", "features", "max_machines", "max_gpus", "protections", "not_before",
    "expires_at", "grace_until", "clock", "clock_anchor", "clock_moved_back",
}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("NODEAU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NODEAU_PLANE", "machine")
    monkeypatch.setenv("NODEAU_MACHINE", "testbox")
    yield tmp_path / "home"


def current(installation: str, key_id: str = KEY_ID, **changes: object) -> bytes:
    """A Pro document for ``installation`` valid around the real clock."""
    now = datetime.now(UTC)
    fields: dict[str, object] = {
        "not_before": now - timedelta(days=1),
        "not_after": now + timedelta(days=365),
        "issued_at": now - timedelta(days=1),
        "issuer_key_id": key_id,
        **changes,
    }
    return document(installation, **fields)


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def test_the_whole_path_through_the_composition_root(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plane: Plane = bootstrap.plane(trusted_keys=trusted(KEY_ID, NEXT_KEY_ID))
    first = plane.plans.in_force()
    assert (first.plan, first.reason, first.source) == ("home", "none-present", None)
    installation = first.installation_id

    good = write(tmp_path, "pro.json", current(installation, NEXT_KEY_ID))
    assert install_on(plane, good) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Installed the Pro entitlement from {good}, kept in {home}/entitlement.json."
    assert out[1] == "plan: Pro (accepted)"
    assert f"from: {home}/entitlement.json, signed by key {NEXT_KEY_ID}" in out
    assert "machines: up to 8" in out and "GPUs: up to 64" in out
    assert out[-1] == NOTE

    assert show_on(plane, json=True) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) == PLAN_KEYS
    assert (shown["plan"], shown["accepted"], shown["reason"]) == ("pro", True, "accepted")
    assert shown["features"] == ["automatic-recovery", "cloud-fleet-view"]

    # a document that cannot be accepted is refused, and the installed one stays
    other = write(tmp_path, "other.json", current("inst-elsewhere"))
    assert install_on(plane, other) == REFUSED
    err = capsys.readouterr().err
    assert err.startswith("nodeau: entitlement.other-installation: ")
    assert "issued for installation inst-elsewhere, not this one" in err
    assert err.rstrip().endswith("nothing was replaced, and the plan in force is unchanged.")
    assert plane.plans.in_force().plan == "pro"

    assert plane.plans.remove() == (
        f"Removed the entitlement from {home}/entitlement.json: new decisions use the free"
        " Home plan; nothing already serving is stopped."
    )
    assert (plane.plans.in_force().plan, plane.plans.in_force().reason) == ("home", "none-present")
    assert plane.plans.in_force().installation_id == installation


def test_the_compiled_in_keys_refuse_a_test_key(home: Path, tmp_path: Path) -> None:
    plane = bootstrap.plane()
    doc = write(tmp_path, "pro.json", current(plane.plans.in_force().installation_id))
    outcome = plane.plans.install(doc.read_bytes(), str(doc))
    assert (outcome.installed, outcome.plan.reason) == (False, "unknown-key")
    assert not (home / "entitlement.json").exists()


def machine_plane(home: Path, clock: Clock[datetime]) -> MachinePlane:
    from nodeau.adapters.entitlement_document import Ed25519EntitlementVerifier

    s = bootstrap.settings()
    verifier = Ed25519EntitlementVerifier(trusted())
    return MachinePlane(s, bootstrap.LazyMachineParts(s, verifier), clock)


def test_expiry_warns_then_keeps_the_terms_through_the_grace_then_home(home: Path) -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    clock = Clock(start + timedelta(days=10))
    plane = machine_plane(home, clock)
    doc = document(plane.plans.in_force().installation_id, issued_at=start, not_before=start)
    assert plane.plans.install(doc, "pro.json").installed
    expiry = start + timedelta(days=365)

    clock.now = expiry - timedelta(days=29)
    ahead = plane.plans.in_force()
    assert (ahead.plan, ahead.reason) == ("pro", "accepted")
    assert ahead.warning is not None and ahead.warning.startswith("The Pro entitlement expires at")
    assert f"warning: {ahead.warning}" in plan_lines(ahead)

    clock.now = expiry + timedelta(days=13)
    grace = plane.plans.in_force()
    assert (grace.plan, grace.grace_until) == ("pro", expiry + timedelta(days=14))
    assert grace.warning is not None and "expired at" in grace.warning

    clock.now = expiry + timedelta(days=14)
    over = plane.plans.in_force()
    assert (over.plan, over.reason, over.warning) == ("home", "expired", None)


def test_a_clock_moved_back_is_detected_from_the_stored_anchor_and_said(home: Path) -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    clock = Clock(start + timedelta(days=100))
    plane = machine_plane(home, clock)
    doc = document(plane.plans.in_force().installation_id, issued_at=start, not_before=start)
    assert plane.plans.install(doc, "pro.json").installed

    clock.now = start + timedelta(days=50)  # back 50 days: still inside the window
    view = plane.plans.in_force()
    assert (view.plan, view.reason, view.clock_moved_back) == ("home", "clock-moved-back", True)
    assert view.sentence.startswith(f"The clock reads {clock.now.isoformat()}, more than 24")
    assert view.clock_anchor == start + timedelta(days=100)
    assert plan_lines(view)[-2] == (
        f"clock: moved back: it reads {clock.now.isoformat()}, and this installation has"
        f" already seen {view.clock_anchor.isoformat()}"
    )
    # the anchor did not move back with the clock; a right clock again is accepted
    clock.now = start + timedelta(days=100, hours=1)
    assert plane.plans.in_force().plan == PlanName.PRO.value
