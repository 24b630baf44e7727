"""The organisation's policy and the plan's bounds on a fleet, on a real API server.

The installed ``nodeau`` and the real controller trust only compiled-in keys (Home plan). Each
refusal kind through ``nodeau run``: permission and quota said by the command, a limit by the
controller, and the plan's bound. The person asking is the kubeconfig user.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.identity import KubeIdentity
from nodeau.adapters.kube.organisation import KubeOrganisationPolicy
from tests.support.contracts.organisation_policy_contract import POLICY_CONTRACT
from tests.support.real.cli import Cli
from tests.support.real.kube_apply import DEPLOY, apply_manifests
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, create, get, small
from tests.support.real.kube_nodes import wait_for

UNPROVED = ("--unproved",)


@pytest.fixture
def cli(cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path) -> Cli:
    return Cli(
        tmp_path / "home", timeout_s=120, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )  # fmt: skip


def put_policy(api: Any, document: dict[str, object]) -> None:
    """The policy in its ConfigMap, as an admin with kubectl (not the command) keeps it."""
    KubeOrganisationPolicy(api).install(json.dumps(document).encode())


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    line: str = done.stderr.strip().splitlines()[-1]
    return line


def objects(api: Any) -> list[str]:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES
    )
    return sorted(o["metadata"]["name"] for o in listed["items"])


@pytest.mark.parametrize("check", POLICY_CONTRACT, ids=lambda c: c.__name__)
def test_the_configmap_keeps_the_policy_as_the_file_does(
    fresh_fleet: client.ApiClient, check: Any
) -> None:
    check(KubeOrganisationPolicy(fresh_fleet))


def test_the_api_server_names_who_asks(fresh_fleet: client.ApiClient, cli: Cli) -> None:
    who = KubeIdentity(fresh_fleet).requester()
    shown = cli.json("organisation")
    assert isinstance(shown, dict)
    assert (shown["user"], shown["configured"], shown["role"]) == (who.user, False, "admin")
    assert not any(g.startswith("system:") for g in shown["groups"])


def test_each_refusal_kind_through_nodeau_run_on_the_fleet(
    fresh_fleet: client.ApiClient, cli: Cli, controller: None, tmp_path: Path
) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 1, small("m1"))
    user = KubeIdentity(api).requester().user

    document = tmp_path / "policy.json"
    document.write_text(json.dumps({"everyone": "operator"}))
    assert last_line(cli("organisation", "install", str(document))) == (
        "refused (limit): limit.feature-not-in-plan: The Home plan does not include "
        "organisation-limits; the Team plan does."
    )

    put_policy(api, {"roles": {"admin": ["someone-else"]}})
    run = ("run", "qwen", "--name", "chat", "--wait", "60", *UNPROVED)
    assert last_line(cli(*run)) == (
        f"refused (permission): permission.role-may-not: {user} has the viewer role, which "
        "may not run; only operators and admins (someone-else) can, by the organisation's "
        "policy"
    )
    assert objects(api) == []  # nothing was created
    assert last_line(cli("scheduling", "drain", "--node", "m1")).startswith(
        f"refused (permission): permission.role-may-not: {user} has the viewer role"
    )

    put_policy(api, {"everyone": "operator", "limits": {"max_context_tokens": 1024}})
    assert last_line(cli(*run, "--context", "2048")) == (
        "refused (limit): limit.context-over-limit: The request asks for a context of 2048 "
        "tokens and the organisation's limit is 1024."
    )
    wait_for(lambda: objects(api) == [], "the refused GPUService is gone")

    put_policy(api, {"everyone": "operator", "quotas": {"users": {user: {"max_workloads": 1}}}})
    first = cli(*run, "--context", "1024")
    assert first.returncode == 0, first.stderr
    spec = client.CustomObjectsApi(api).get_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "chat"
    )["spec"]
    assert spec["requester"]["user"] == user
    second = ("run", "qwen", "--name", "chat-2", "--context", "1024", "--wait", "60", *UNPROVED)
    assert last_line(cli(*second)) == (
        f"refused (quota): quota.workloads-exhausted: User {user} runs 1 of its 1 workloads; "
        "stopping a workload frees quota."
    )
    assert objects(api) == ["chat"]
    explained = cli("plan", "explain", "qwen", "--name", "chat-2", "--context", "1024", *UNPROVED)
    assert explained.returncode == 2
    assert explained.stdout.strip().splitlines()[-1] == last_line(cli(*second))


def test_the_home_plan_covers_two_machines_and_refusing_beyond_is_a_limit(
    fresh_fleet: client.ApiClient, cli: Cli, controller: None
) -> None:
    api = fresh_fleet
    add_machine(api, "a1", 1)  # no copy of qwen
    add_machine(api, "a2", 1)  # no copy either
    add_machine(api, "z3", 1, small("z3"))  # the only copy, beyond the Home plan's two
    done = cli("run", "qwen", "--name", "chat", "--wait", "60", *UNPROVED)
    assert last_line(done) == (
        "refused (limit): limit.machines-over-plan: every card that can take qwen is beyond "
        "what the Home plan covers (2 machines; on z3); an entitlement for a larger plan "
        "covers them (nodeau plan)"
    )
    wait_for(lambda: objects(api) == [], "the refused GPUService is gone")


def test_a_requester_must_be_the_user_creating_the_object(
    cluster: Cluster, fresh_fleet: client.ApiClient
) -> None:
    """deploy/15-requester-policy.yaml: the API server refuses a requester naming someone else."""
    api = fresh_fleet
    apply_manifests(api, [DEPLOY / "15-requester-policy.yaml"])
    try:
        forged_and_own(api)
    finally:  # the cluster outlives this test: leave no policy behind
        admission = client.AdmissionregistrationV1Api(api)
        admission.delete_validating_admission_policy_binding("nodeau-requester")
        admission.delete_validating_admission_policy("nodeau-requester")


def forged_and_own(api: Any) -> None:
    body = {
        "apiVersion": r.API_VERSION,
        "kind": r.GPUSERVICE_KIND,
        "metadata": {"name": "forged", "namespace": r.NAMESPACE},
        "spec": {"model": "qwen", "requester": {"user": "someone-else"}},
    }
    custom = client.CustomObjectsApi(api)

    def refused() -> bool:
        try:
            custom.create_namespaced_custom_object(
                r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, body
            )
        except client.ApiException as exc:
            return exc.status == 403 and "must be the user creating it" in str(exc.body)
        custom.delete_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "forged"
        )
        return False

    wait_for(refused, "the policy refuses a forged requester")  # policies load asynchronously
    who = KubeIdentity(api).requester().user
    own = {**body, "spec": {"model": "qwen", "requester": {"user": who}}}
    custom.create_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, own)
    assert objects(api) == ["forged"]


def test_the_controller_holds_a_quota_for_services_applied_by_hand(
    fresh_fleet: client.ApiClient, cli: Cli, controller: None
) -> None:
    """No command checks an object applied with kubectl: the controller counts what the
    requester's workloads hold (its store gives a decision no records) and refuses the one
    over the quota, in its status and in ``nodeau ps``. The requester is the user applying
    it (deploy/'s admission policy refuses any other name)."""
    api = fresh_fleet
    add_machine(api, "m1", 2, small("m1"))
    user = KubeIdentity(api).requester().user
    put_policy(api, {"everyone": "operator", "quotas": {"users": {user: {"max_workloads": 1}}}})
    create(api, "first", "qwen", requester={"user": user})
    wait_for(lambda: (get(api, "first") or {}).get("status", {}).get("gpuUUID"), "first placed")
    create(api, "second", "qwen", requester={"user": user})
    wait_for(
        lambda: (get(api, "second") or {}).get("status", {}).get("state") == "refused",
        "second refused",
    )
    said = f"User {user} runs 1 of its 1 workloads; stopping a workload frees quota."
    refusal = (get(api, "second") or {})["status"]["refusal"]
    assert (refusal["kind"], refusal["code"], refusal["message"]) == (
        "quota",
        "quota.workloads-exhausted",
        said,
    )
    shown = cli("ps", "-o", "wide")
    assert shown.returncode == 0, shown.stderr
    line = next(row for row in shown.stdout.splitlines() if row.startswith("second"))
    assert said in line
