"""Reaching the cluster as kubectl would: explicit file, $KUBECONFIG, ~/.kube/config, in-cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.kube import client as kube_client
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import ClusterUnreachable, Connection, connect
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.ports.cluster import (
    ClusterRefused,
    Conflict,
    Forbidden,
    NoAnswer,
    NotFound,
    Unauthorized,
)
from nodeau.ports.errors import NodeauError
from nodeau.ports.state import StateError
from tests.support.clock import ticking
from tests.support.real.kube_cluster import Cluster


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $KUBECONFIG, an empty home, no ServiceAccount: nothing to find unless a test adds it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_TOKEN", tmp_path / "sa" / "token")
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_CA", tmp_path / "sa" / "ca.crt")
    return home


def current_context(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["current-context"])


def answers(connection: Connection) -> bool:
    namespace: Any = client.CoreV1Api(connection.api).read_namespace(r.NAMESPACE)
    return bool(namespace.metadata.name == r.NAMESPACE)


def one_line(caught: pytest.ExceptionInfo[ClusterUnreachable]) -> str:
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_explicit_kubeconfig_is_used_with_its_current_context(
    cluster: Cluster, nowhere: Path
) -> None:
    connection = connect(cluster.kubeconfig)
    assert connection.server == cluster.server
    assert connection.context == current_context(cluster.kubeconfig)
    assert answers(connection)


def test_kubeconfig_from_the_environment_then_from_home(
    cluster: Cluster, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert answers(connect(environ={"KUBECONFIG": str(cluster.kubeconfig)}))
    (nowhere / ".kube").mkdir()
    (nowhere / ".kube" / "config").write_text(cluster.kubeconfig.read_text())
    from_home = connect()
    assert (from_home.server, from_home.context) == (
        cluster.server,
        current_context(cluster.kubeconfig),
    )
    assert answers(from_home)


def test_a_named_context_is_used_and_an_unknown_one_is_one_line(
    cluster: Cluster, tmp_path: Path, nowhere: Path
) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"].append({"name": "elsewhere", "cluster": {"server": "https://10.9.8.7:6443"}})
    user = config["contexts"][0]["context"]["user"]
    config["contexts"].append({"name": "other", "context": {"cluster": "elsewhere", "user": user}})
    path = tmp_path / "two-contexts"
    path.write_text(yaml.safe_dump(config))
    other = connect(path, context="other")
    assert (other.server, other.context) == ("https://10.9.8.7:6443", "other")
    with pytest.raises(ClusterUnreachable) as caught:
        connect(path, context="staging")
    assert one_line(caught) == (
        f"{path}: no context called staging (known: {current_context(path)}, other)"
    )


def test_a_missing_or_broken_kubeconfig_is_one_line_naming_the_file(
    tmp_path: Path, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ClusterUnreachable) as caught:
        connect(missing)
    assert one_line(caught) == f"{missing}: no such kubeconfig file"
    with pytest.raises(ClusterUnreachable) as caught:
        connect(environ={"KUBECONFIG": str(missing)})
    assert one_line(caught) == f"{missing}: no such kubeconfig file"
    for text in ("clusters: [unclosed\n  - {", "just a sentence", "contexts: []\n"):
        broken = tmp_path / "broken.yaml"
        broken.write_text(text)
        with pytest.raises(ClusterUnreachable) as caught:
            connect(broken)
        assert one_line(caught).startswith(f"{broken}: ")


def test_no_kubeconfig_and_no_service_account_is_one_line(nowhere: Path) -> None:
    with pytest.raises(ClusterUnreachable) as caught:
        connect()
    message = one_line(caught)
    assert message.startswith("no kubeconfig ($KUBECONFIG is not set and ")
    assert f"{nowhere / '.kube' / 'config'} does not exist) and not running in a cluster" in message


def test_in_a_pod_the_service_account_is_used(
    cluster: Cluster, tmp_path: Path, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text(cluster.token)
    (account / "ca.crt").write_bytes(cluster.ca_file.read_bytes())
    where = urlsplit(cluster.server)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(where.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(where.port))
    connection = connect()
    assert (connection.server, connection.context) == (cluster.server, None)
    assert answers(connection)


def test_a_cluster_that_does_not_answer_is_one_line_from_the_store(
    cluster: Cluster, tmp_path: Path, nowhere: Path
) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # discard: nobody listens
    path = tmp_path / "dead"
    path.write_text(yaml.safe_dump(config))
    store = KubeStateStore(connect(path).api, clock=ticking())
    with pytest.raises(StateError) as caught:
        store.snapshot()
    message = str(caught.value)
    assert message.startswith("cannot read the reservation ledger: the cluster does not answer (")
    assert "\n" not in message


# The one place the client's errors become the port's


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, Unauthorized),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (422, ClusterRefused),
        (500, ClusterRefused),
    ],
)
def test_an_error_status_is_the_ports_error_with_what_the_server_said(
    status: int, kind: type[ClusterRefused]
) -> None:
    body = json.dumps({"kind": "Status", "message": 'gpuservices.nodeau.ai  "x"\nnot found'})
    with pytest.raises(kind) as caught, kube_client.api_errors("read GPUService x"):
        raise ApiException(status=status, reason="Whatever", body=body)
    refused = caught.value
    assert type(refused) is kind
    assert (refused.status, refused.message) == (status, 'gpuservices.nodeau.ai "x" not found')
    assert str(refused) == f'cannot read GPUService x: {status} gpuservices.nodeau.ai "x" not found'
    assert isinstance(refused.__cause__, ApiException)
    assert isinstance(refused, NodeauError)


def test_no_status_message_falls_back_to_the_reason() -> None:
    with (
        pytest.raises(ClusterRefused, match=r"^cannot list Nodes: 503 Service Unavailable$"),
        kube_client.api_errors("list Nodes"),
    ):
        raise ApiException(status=503, reason="Service Unavailable")


def test_no_answer_is_no_answer_naming_its_cause() -> None:
    cause = urllib3.exceptions.NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
    retried = urllib3.exceptions.MaxRetryError(None, "/api", cause)  # type: ignore[arg-type]
    with (
        pytest.raises(NoAnswer) as caught,
        kube_client.api_errors("read the reservation ledger"),
    ):
        raise retried
    assert str(caught.value).startswith(
        "cannot read the reservation ledger: the cluster does not answer ("
    )
    assert caught.value.detail == str(cause)  # urllib3's reason, not the retry wrapper
    assert caught.value.__cause__ is retried


def test_a_404_is_none_only_where_it_means_not_there() -> None:
    def missing() -> object:
        raise ApiException(status=404, reason="Not Found")

    def forbidden() -> object:
        raise ApiException(status=403, reason="Forbidden")

    assert kube_client.or_none("read Pod p", missing) is None
    assert kube_client.or_none("read Pod p", lambda: "found") == "found"
    with pytest.raises(Forbidden):
        kube_client.or_none("read Pod p", forbidden)
