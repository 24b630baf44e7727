"""``nodeau plan`` through the installed command on one machine.

The installed command trusts only its compiled-in keys, so a test-signed document is refused as
``unknown-key``; the accepted path runs in process (tests/unit/apps/test_plan.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.builders.entitlements import KEY_ID, document
from tests.support.real.cli import Cli


def test_plan_shows_home_and_refuses_what_it_cannot_accept(tmp_path: Path) -> None:
    nodeau = Cli(tmp_path / "home", timeout_s=60, NODEAU_PLANE="machine")
    shown = nodeau.json("plan")
    assert isinstance(shown, dict)
    assert (shown["plan"], shown["reason"], shown["source"]) == ("home", "none-present", None)
    assert (shown["max_machines"], shown["max_gpus"], shown["features"]) == (
        2,
        8,
        ["automatic-recovery"],
    )
    installation = shown["installation_id"]

    text = nodeau("plan")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[:2] == [
        "plan: Home (none-present)",
        "No entitlement is installed; running on the free Home plan.",
    ]
    assert f"installation: {installation}" in text.stdout

    signed = tmp_path / "pro.json"
    signed.write_bytes(document(installation))
    done = nodeau("plan", "install", str(signed))
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"nodeau: entitlement.unknown-key: {signed} was not installed: The entitlement is"
        f" signed by key {KEY_ID}, which this build does not know (this build trusts "
    )
    assert not (tmp_path / "home" / "entitlement.json").exists()

    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00not an entitlement")
    outcome = nodeau("plan", "install", str(garbage), "--json")
    assert outcome.returncode == 2
    refused = json.loads(outcome.stdout)
    assert (refused["installed"], refused["plan"]["reason"]) == (False, "malformed")
    assert refused["plan"]["detail"] == "the document is not JSON"

    missing = nodeau("plan", "install", str(tmp_path / "absent.json"))
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"nodeau: cannot read {tmp_path / 'absent.json'}")

    removed = nodeau("plan", "remove")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith("No entitlement is installed")
    again = nodeau.json("plan")
    assert isinstance(again, dict) and again["installation_id"] == installation
