"""A real Kubernetes control plane for tests: etcd, kube-apiserver and KWOK, on 127.0.0.1 only.

Binaries from ``scripts/build-kube-binaries`` (``~/.cache/nodeau/kube-bin/<version>/bin`` or
``NODEAU_KUBE_BIN``); a missing one fails with the command that builds it, never skips. KWOK plays
the kubelets of nodes annotated ``kwok.x-k8s.io/node=fake``.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import yaml
from attrs import frozen
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes import client, config

K8S_VERSION = os.environ.get("NODEAU_K8S_VERSION", "v1.35.4")
BINARIES = ("etcd", "kube-apiserver", "kwok", "kwok-stages.yaml")
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
READY_TIMEOUT_S = 90.0


class ClusterError(RuntimeError):
    """The test control plane could not be started."""


def binary_dir() -> Path:
    """Where the built binaries are; fails with the build command when one is missing."""
    configured = os.environ.get("NODEAU_KUBE_BIN")
    cache = Path(os.environ.get("NODEAU_KUBE_BIN_CACHE", Path.home() / ".cache/nodeau/kube-bin"))
    where = Path(configured) if configured else cache / K8S_VERSION / "bin"
    missing = [name for name in BINARIES if not (where / name).is_file()]
    if missing:
        raise ClusterError(
            f"{', '.join(missing)} not found in {where}: run scripts/build-kube-binaries"
        )
    return where


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: str,
    key: rsa.RSAPrivateKey,
    *,
    issuer: tuple[x509.Certificate, rsa.RSAPrivateKey] | None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        return builder.sign(key, hashes.SHA256())
    builder = builder.add_extension(
        x509.SubjectAlternativeName(
            [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
            ]
        ),
        False,
    )
    return builder.sign(issuer[1], hashes.SHA256())


def write_certificates(directory: Path) -> dict[str, Path]:
    """A CA, a serving certificate for 127.0.0.1 signed by it, and a service-account key."""
    ca_key = _key()
    ca = _certificate("nodeau-test-ca", ca_key, issuer=None)
    server_key = _key()
    server = _certificate("kube-apiserver", server_key, issuer=(ca, ca_key))
    files = {
        "ca": directory / "ca.crt",
        "cert": directory / "apiserver.crt",
        "key": directory / "apiserver.key",
        "sa": directory / "service-account.key",
    }
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(_pem_key(server_key))
    files["sa"].write_bytes(_pem_key(_key()))
    return files


@frozen(kw_only=True)
class Cluster:
    """A running test control plane: where it is and how to reach it."""

    server: str
    token: str
    ca_file: Path
    kubeconfig: Path
    workdir: Path

    def http(self) -> httpx.Client:
        """An admin client for raw API calls (the tests' own view of the cluster)."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        return httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {self.token}"},
            verify=context,
            timeout=10.0,
        )


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str, user: str) -> None:
    """A kubeconfig as kubectl reads it: one cluster, one user, one current context."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "nodeau-test",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_file.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": f"{user}@nodeau-test", "context": {"cluster": "nodeau-test", "user": user}}
        ],
        "current-context": f"{user}@nodeau-test",
    }
    path.write_text(yaml.safe_dump(config))


class ControlPlane:
    """Starts etcd, kube-apiserver and KWOK as child processes; ``stop`` ends them all."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("wb")
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.processes.append((name, process))
        return process

    def _log_tail(self, name: str) -> str:
        text = (self.workdir / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-15:])

    def start(self, *, kwok: bool = True, service_accounts: bool = False) -> Cluster:
        """Start everything and wait until the API server says it is ready. ``kwok``: start
        KWOK for simulated nodes; ``service_accounts``: keep the ServiceAccount admission
        plugin (Pods get their token volume; something must then create each namespace's
        default ServiceAccount: kube-controller-manager, for a real node)."""
        bins = binary_dir()
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn("etcd", [
            str(bins / "etcd"), "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ])  # fmt: skip
        certs = write_certificates(self.workdir)
        token = secrets.token_hex(16)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{token},nodeau-test-admin,admin-uid,"system:masters"\n')
        server = f"https://127.0.0.1:{api_port}"
        api = self._spawn("kube-apiserver", [
            str(bins / "kube-apiserver"),
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}", f"--etcd-servers={etcd_url}",
            f"--tls-cert-file={certs['cert']}", f"--tls-private-key-file={certs['key']}",
            f"--client-ca-file={certs['ca']}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={certs['sa']}",
            f"--service-account-signing-key-file={certs['sa']}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24",
            # no kube-controller-manager runs, so nothing creates default ServiceAccounts
            *(() if service_accounts else ("--disable-admission-plugins=ServiceAccount",)),
            # a real kubelet (no KWOK) is reached at its node's address, never its hostname
            *(() if kwok else ("--kubelet-preferred-address-types=InternalIP",)),
            "--enable-priority-and-fairness=false", "--profiling=false",
            f"--cert-dir={self.workdir / 'generated-certs'}",
        ])  # fmt: skip
        cluster = Cluster(
            server=server, token=token, ca_file=certs["ca"],
            kubeconfig=self.workdir / "kubeconfig", workdir=self.workdir,
        )  # fmt: skip
        write_kubeconfig(
            cluster.kubeconfig, server=server, ca_file=certs["ca"], token=token,
            user="nodeau-test-admin",
        )  # fmt: skip
        self._wait_ready(cluster, api)
        if not kwok:
            return cluster
        self._spawn("kwok", [
            str(bins / "kwok"), f"--kubeconfig={cluster.kubeconfig}",
            f"--config={bins / 'kwok-stages.yaml'}",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--node-lease-duration-seconds=40", "--cidr=10.240.0.0/16",
            "--node-ip=127.0.0.1",
        ])  # fmt: skip
        return cluster

    def _wait_ready(self, cluster: Cluster, api: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        with cluster.http() as http:
            while time.monotonic() < deadline:
                if api.poll() is not None:
                    raise ClusterError(
                        f"kube-apiserver exited with {api.returncode}:\n"
                        + self._log_tail("kube-apiserver")
                    )
                try:
                    if http.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        raise ClusterError(
            f"kube-apiserver not ready within {READY_TIMEOUT_S} s:\n"
            + self._log_tail("kube-apiserver")
        )

    def stop(self) -> None:
        """End every process (KWOK first, etcd last) and remove the data directory."""
        for _name, process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        self.processes.clear()
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)

    def kwok(self) -> subprocess.Popen[bytes]:
        """The KWOK process (a test stops it to make machines stop answering)."""
        return next(process for name, process in self.processes if name == "kwok")


def api_client(cluster: Cluster) -> client.ApiClient:
    """A kubernetes client configured from the cluster's kubeconfig, as kubectl would be."""
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-any-return,no-untyped-call]
