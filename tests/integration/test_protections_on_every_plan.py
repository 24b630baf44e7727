"""Nothing that protects a person is a plan feature: every plan gives the same protecting answers.

Table-driven over Home, Pro, Team and Enterprise, each a fresh installation: admission, artifact
verification, authentication and integrity checks must answer alike, and protect.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from nodeau.adapters.dashboard_token import TokenFile
from nodeau.adapters.endpoint_client import HttpxEndpointClient
from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.models import import_, verify
from nodeau.apps.dashboard.app import create_app
from nodeau.apps.serving.commands import RunAsk
from nodeau.domain.plans import PlanName
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from tests.support.builders.entitlements import document, trusted
from tests.support.builders.tiny_gguf import write_tiny_llama


def outcomes(home: Path, plan: PlanName, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What each protection answers on a fresh installation under ``plan``."""
    monkeypatch.setenv("NODEAU_HOME", str(home))
    monkeypatch.setenv("NODEAU_PLANE", "machine")
    monkeypatch.setenv("NODEAU_MACHINE", "testbox")
    monkeypatch.setenv("NODEAU_SIMULATED_GPUS", "1 x 1 GiB")
    monkeypatch.setenv("NODEAU_DISK_RESERVE_BYTES", "0")
    plane = bootstrap.plane(trusted_keys=trusted())
    installation = plane.plans.in_force().installation_id
    now = datetime.now(UTC)
    signed = document(
        installation,
        plan=plan,
        not_before=now - timedelta(days=1),
        not_after=now + timedelta(days=90),
        issued_at=now - timedelta(days=1),
    )
    if plan is not PlanName.HOME:
        assert plane.plans.install(signed, "plan.json").installed
    assert plane.plans.in_force().plan == plan.value
    found: dict[str, object] = {}

    # admission: a context too large for the 1 GiB card is refused, with the same figures
    model = write_tiny_llama(home.parent / f"tiny-{plan.value}.gguf", seed=9, quant="q8_0")
    assert import_(model, alias="tiny") == 0
    ask = RunAsk(
        model="tiny", name="tiny", task=Task.CHAT, context_tokens=4_000_000, unproved=True,
        recovery=RecoveryMode.NEVER, recovery_after=timedelta(minutes=3),
    )  # fmt: skip
    explained = plane.serving.explain(ask)
    assert explained.refusal is not None
    found["admission"] = (explained.refusal.code.value, explained.refusal.sentence)

    # artifact verification: the kept copy damaged in place is found damaged
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))  # the store hard-links the file: the kept copy changed too
    found["verification"] = verify("tiny")

    # authentication: the dashboard answers nothing without its token, nor a foreign Host
    token_path = home / "dashboard-token"
    token_path.write_text("t" * 43)
    app = create_app(
        plane,
        client=HttpxEndpointClient(),
        model_rows=lambda: (),
        token=TokenFile(token_path),
        clock=lambda: now,
    )
    with TestClient(app, base_url="http://127.0.0.1:8999") as http:
        found["no token"] = http.get("/api/board").status_code
        found["wrong token"] = http.get(
            "/api/board", headers={"Authorization": "Bearer " + "u" * 43}
        ).status_code
        found["foreign host"] = http.get(
            "/api/board", headers={"Host": "evil.example:8999"}
        ).status_code

    # integrity: an entitlement changed by one byte is refused, whatever is installed
    # (one byte of the signed payload: the expiry's year, so the document still parses and only
    # the signature can tell; a byte flipped at random may instead break the base64 or JSON)
    refused = plane.plans.install(tampered_expiry(signed), "tampered.json")
    found["tampered entitlement"] = (refused.installed, refused.plan.reason)
    return found


def tampered_expiry(signed: bytes) -> bytes:
    """``signed`` with the first digit of its payload's expiry year raised by one."""
    envelope = json.loads(signed)
    payload = bytearray(base64.b64decode(envelope["payload"]))
    at = payload.index(b'"not_after":"') + len(b'"not_after":"')
    payload[at] += 1
    envelope["payload"] = base64.b64encode(bytes(payload)).decode("ascii")
    return json.dumps(envelope, separators=(",", ":")).encode("utf-8")


def test_every_plan_gets_the_same_protections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = {plan: outcomes(tmp_path / plan.value / "home", plan, monkeypatch) for plan in PlanName}
    capsys.readouterr()
    home = seen[PlanName.HOME]
    code, sentence = home["admission"]  # type: ignore[misc]
    assert code == "capacity.no-card-large-enough"
    assert "(estimated)" in sentence  # an estimate says so, on every plan
    assert home["verification"] == 1  # a mismatch: not verified
    assert (home["no token"], home["wrong token"], home["foreign host"]) == (401, 401, 403)
    assert home["tampered entitlement"] == (False, "bad-signature")
    for plan, answers in seen.items():
        assert answers == home, plan
