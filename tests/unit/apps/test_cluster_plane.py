"""Which plane a command acts on, and the shapes ``nodeau join`` checks before it does anything."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st
from returns.pipeline import is_successful

from nodeau.adapters.kube.bootstrap_tokens import ALPHABET, BootstrapToken, ca_cert_hash, new_token
from nodeau.apps.cli.cluster_join import api_endpoint, join_step, parse_ttl
from nodeau.apps.cli.cluster_plane import (
    KUBERNETES,
    MACHINE,
    choose,
    read_plane_file,
    write_plane_file,
)
from nodeau.apps.cli.errors import SettingsError
from nodeau.apps.cli.main import run
from nodeau.apps.planes.kubernetes import banner
from nodeau.apps.serving.commands import workload_name
from nodeau.ports.join_tokens import parse_ca_hash, parse_token

TOKEN_CHARS = st.text(alphabet=ALPHABET, min_size=1, max_size=30)


def test_the_machine_is_the_default_plane(tmp_path: Path) -> None:
    choice = choose({}, tmp_path)
    assert (choice.plane, choice.origin, choice.kubeconfig) == (MACHINE, "default", None)


def test_the_plane_file_chooses_kubernetes_with_its_kubeconfig(tmp_path: Path) -> None:
    written = write_plane_file(tmp_path, kubeconfig=tmp_path / "fleet.yaml", context="prod")
    choice = choose({}, tmp_path)
    assert choice.kubernetes and choice.origin == str(written)
    assert (choice.kubeconfig, choice.context) == (tmp_path / "fleet.yaml", "prod")
    assert read_plane_file(written) == choice


def test_nodeau_plane_overrides_the_file_either_way(tmp_path: Path) -> None:
    assert choose({"NODEAU_PLANE": KUBERNETES}, tmp_path).kubernetes
    write_plane_file(tmp_path, kubeconfig=tmp_path / "k", context=None)
    forced = choose({"NODEAU_PLANE": MACHINE}, tmp_path)
    assert (forced.plane, forced.origin) == (MACHINE, "NODEAU_PLANE")
    both = choose({"NODEAU_PLANE": KUBERNETES}, tmp_path)
    assert (both.plane, both.kubeconfig) == (KUBERNETES, tmp_path / "k")


def test_a_machine_plane_file_means_the_machine(tmp_path: Path) -> None:
    (tmp_path / "plane.json").write_text(json.dumps({"plane": "machine"}))
    assert choose({}, tmp_path).plane == MACHINE


@pytest.mark.parametrize("content", ["{not json", json.dumps({"plane": "cloud"}), "[]"])
def test_an_unusable_plane_file_is_one_line(tmp_path: Path, content: str) -> None:
    (tmp_path / "plane.json").write_text(content)
    with pytest.raises(SettingsError, match=r"plane\.json"):
        choose({}, tmp_path)
    assert choose({"NODEAU_PLANE": MACHINE}, tmp_path).plane == MACHINE  # the way out


def test_an_unknown_nodeau_plane_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="NODEAU_PLANE must be one of machine, kubernetes"):
        choose({"NODEAU_PLANE": "k8s"}, tmp_path)


def test_the_banner_names_server_context_and_namespace() -> None:
    assert banner("https://10.0.0.1:6443", "admin@prod") == (
        "nodeau: fleet on Kubernetes at https://10.0.0.1:6443 (context admin@prod), "
        "namespace nodeau-system"
    )


@pytest.mark.parametrize("argv", [["ps"], ["ps", "--json"], ["fleet", "list"]])
def test_on_kubernetes_no_command_answers_with_this_machines_data(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """The ps fast path too: with no kubeconfig the answer is one line, not the machine's rows."""
    monkeypatch.setenv("NODEAU_HOME", str(tmp_path))
    monkeypatch.setenv("NODEAU_SIMULATED_GPUS", "1 x 8 GiB")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.yaml"))
    write_plane_file(tmp_path, kubeconfig=None, context=None)
    with pytest.raises(SystemExit) as exited:
        run(argv)
    out = capsys.readouterr()
    assert exited.value.code == 1 and out.out == ""
    assert out.err == f"nodeau: {tmp_path / 'missing.yaml'}: no such kubeconfig file\n"


def test_a_cluster_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    """A kubeconfig naming a port nothing listens on: a banner, one line, no traceback."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before nodeau runs: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    from tests.support.real.cli import Cli

    done = Cli(tmp_path, timeout_s=120, NODEAU_PLANE="kubernetes", KUBECONFIG=str(kubeconfig))("ps")
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    assert lines[0] == banner(f"https://127.0.0.1:{port}", "ctx")
    assert len(lines) == 2
    assert lines[1].startswith("nodeau: cannot list gpuservices: the cluster does not answer (")


@settings(max_examples=50)
@given(st.builds(BootstrapToken, id=st.text(ALPHABET, min_size=6, max_size=6),
                 secret=st.text(ALPHABET, min_size=16, max_size=16)))  # fmt: skip
def test_a_well_formed_token_parses_back_to_itself(token: BootstrapToken) -> None:
    assert parse_token(token.text).unwrap() == token


@settings(max_examples=100)
@given(TOKEN_CHARS, TOKEN_CHARS)
def test_a_token_of_any_other_shape_is_refused_in_one_sentence(head: str, tail: str) -> None:
    text = f"{head}.{tail}"
    parsed = parse_token(text)
    assert is_successful(parsed) == (len(head) == 6 and len(tail) == 16)
    if not is_successful(parsed):
        assert parsed.failure().startswith("--token must look like abcdef.0123456789abcdef")
    assert not is_successful(parse_token(head + tail))  # no dot


def test_fresh_tokens_have_the_shape_and_differ() -> None:
    tokens = {new_token() for _ in range(20)}
    assert len(tokens) == 20
    assert all(is_successful(parse_token(t.text)) for t in tokens)


@settings(max_examples=50)
@given(st.binary(min_size=1, max_size=64))
def test_a_pin_is_sha256_and_64_hex_digits(data: bytes) -> None:
    digest = hashlib.sha256(data).hexdigest()
    assert parse_ca_hash(f"sha256:{digest}").unwrap() == f"sha256:{digest}"
    assert parse_ca_hash(f"SHA256:{digest.upper()}").unwrap() == f"sha256:{digest}"
    for wrong in (digest, f"sha256:{digest[:-1]}", f"sha1:{digest}", f"sha256:{digest}0"):
        assert parse_ca_hash(wrong).failure().startswith("--ca-cert-hash must be sha256:")


def a_ca_certificate() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def test_the_pin_is_what_kubeadms_documented_openssl_pipeline_computes() -> None:
    pem = a_ca_certificate()
    pubkey = subprocess.run(
        ["openssl", "x509", "-pubkey", "-noout"], input=pem, capture_output=True, check=True
    ).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"],
        input=pubkey, capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert ca_cert_hash(pem) == "sha256:" + hashlib.sha256(der).hexdigest()
    assert is_successful(parse_ca_hash(ca_cert_hash(pem)))


@pytest.mark.parametrize(
    ("server", "endpoint"),
    [
        ("https://10.0.0.1:6443", "10.0.0.1:6443"),
        ("https://api.example.com", "api.example.com:443"),
        ("api.example.com", "api.example.com:6443"),
        ("10.0.0.1:7443", "10.0.0.1:7443"),
        ("https://[fd00::1]:6443/", "[fd00::1]:6443"),
    ],
)
def test_the_join_step_names_host_and_port(server: str, endpoint: str) -> None:
    pin = "sha256:" + "0" * 64
    assert join_step(server, "abcdef.0123456789abcdef", pin) == [
        "kubeadm", "join", endpoint, "--token", "abcdef.0123456789abcdef",
        "--discovery-token-ca-cert-hash", pin,
    ]  # fmt: skip


@pytest.mark.parametrize("server", ["https://", "https://h:port", "https://h:6443/api", ""])
def test_a_server_that_is_not_an_address_is_refused(server: str) -> None:
    with pytest.raises(SettingsError, match="is not an API server address"):
        api_endpoint(server)


def test_token_lifetimes() -> None:
    assert parse_ttl("24h") == timedelta(hours=24)
    assert parse_ttl("7d") == timedelta(days=7)
    for wrong in ("0h", "h", "24", "1.5h", "-1h"):
        with pytest.raises(SettingsError, match="--ttl"):
            parse_ttl(wrong)


@settings(max_examples=100)
@given(st.text(min_size=1, max_size=80))
def test_a_name_made_from_any_model_is_a_valid_kubernetes_name(model: str) -> None:
    try:
        name = workload_name(None, model)
    except SettingsError as exc:
        assert "give --name" in str(exc)
        return
    # Kubernetes' rule for object names (RFC 1123 subdomain), written out independently
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) is not None
    assert len(name) <= 253


def test_a_given_name_is_kept_or_refused() -> None:
    assert workload_name(None, "Qwen2.5 0.5B") == "qwen2.5-0.5b"
    assert workload_name("chat-1", "anything") == "chat-1"
    with pytest.raises(SettingsError, match="--name 'Chat_1'"):
        workload_name("Chat_1", "anything")
