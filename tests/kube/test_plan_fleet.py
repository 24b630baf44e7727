"""``nodeau plan`` on a fleet: the entitlement kept in ConfigMap nodeau-system/nodeau-entitlement.

The installed ``nodeau`` shows the plan and refuses an unknown key's document; the accepted path
runs in process over the same ConfigMap with the test's key.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from nodeau.adapters.entitlement_document import Ed25519EntitlementVerifier
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.entitlement import KubeEntitlementStore
from nodeau.apps.plans.entitlement import install, plan_in_force, remove
from tests.support.builders.entitlements import document, trusted
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster


def config_map(api: Any) -> dict[str, str]:
    found = client.CoreV1Api(api).read_namespaced_config_map(r.ENTITLEMENT_CONFIGMAP, r.NAMESPACE)
    return dict(found.data or {})


def test_plan_install_and_remove_on_the_fleet(
    cluster: Cluster, fresh_fleet: Any, tmp_path: Path
) -> None:
    api = fresh_fleet
    nodeau = Cli(
        tmp_path / "home",
        timeout_s=60,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )
    shown = nodeau.json("plan")
    assert isinstance(shown, dict)
    assert (shown["plan"], shown["reason"]) == ("home", "none-present")
    installation = shown["installation_id"]
    assert config_map(api)[r.INSTALLATION_KEY] == installation

    signed = tmp_path / "pro.json"
    now = datetime.now(UTC)
    doc = document(
        installation,
        not_before=now - timedelta(days=1),
        not_after=now + timedelta(days=90),
        issued_at=now - timedelta(days=1),
    )
    signed.write_bytes(doc)
    done = nodeau("plan", "install", str(signed))
    assert done.returncode == 2 and "entitlement.unknown-key" in done.stderr
    assert r.ENTITLEMENT_KEY not in config_map(api)

    store = KubeEntitlementStore(api)
    verifier = Ed25519EntitlementVerifier(trusted())
    outcome = install("fleet", store, verifier, doc, str(signed), now)
    assert outcome.installed, outcome.sentence
    kept = config_map(api)
    assert kept[r.ENTITLEMENT_KEY].encode() == doc
    assert kept[r.INSTALLATION_KEY] == installation
    view = plan_in_force("fleet", store, verifier, now)
    assert (view.plan, view.source) == (
        "pro",
        "ConfigMap nodeau-system/nodeau-entitlement key entitlement",
    )

    # the installed command does not trust the test key: it says so, and removes it
    after = nodeau.json("plan")
    assert isinstance(after, dict) and (after["plan"], after["reason"]) == ("home", "unknown-key")
    gone = nodeau("plan", "remove")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.startswith("Removed the entitlement from ConfigMap nodeau-system/")
    assert r.ENTITLEMENT_KEY not in config_map(api)
    assert remove(store, now).startswith("No entitlement is installed")
    assert config_map(api)[r.INSTALLATION_KEY] == installation
