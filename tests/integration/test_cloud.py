"""Nodeau Cloud in process against the fake cloud, with the test's own keys.

Sign-in and the entitlement, a bad entitlement, an outage, refused operations, no listener and
disconnect, on the one-machine plane (an installed ``nodeau`` cannot be given a test key:
docs/adr/0011). The reporter of ``connect --fleet`` is a real detached process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

import psutil
import pytest

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.bootstrap import LazyMachineParts
from nodeau.apps.cli.cloud import connect_on, disconnect_lines, run_on, status_text
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.planes.plane import Plane
from tests.support.builders.entitlements import KEY_ID, document, trusted
from tests.support.fakes.fake_cloud import FakeCloud, nowhere, running_fake_cloud

DEADLINE_S = 60.0
# a call's timeout: long enough that a loaded machine's answer is not taken for an outage,
# shorter than the fake's "slow" answer (FakeCloud.slow_s), which must time out
TIMEOUT_S = "2"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("NODEAU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NODEAU_PLANE", "machine")
    monkeypatch.setenv("NODEAU_MACHINE", "testbox")
    monkeypatch.setenv("NODEAU_SIMULATED_GPUS", "1 x 24 GiB")
    monkeypatch.setenv("NODEAU_CLOUD_TIMEOUT_S", TIMEOUT_S)
    monkeypatch.setenv("NODEAU_CLOUD_REPORT_INTERVAL_S", "0.2")
    monkeypatch.setenv("NODEAU_CLOUD_POLL_INTERVAL_S", "0.2")
    yield tmp_path / "home"
    bootstrap.settings()  # the home still reads
    disconnect_lines(bootstrap.settings())  # never leave a reporter running


def pro(installation: str, **changes: object) -> bytes:
    now = datetime.now(UTC)
    fields: dict[str, object] = {
        "not_before": now - timedelta(days=1),
        "not_after": now + timedelta(days=30),
        "issued_at": now - timedelta(days=1),
        **changes,
    }
    return document(installation, **fields)


def plane() -> Plane:
    return bootstrap.plane(trusted_keys=trusted(KEY_ID))


def connect(url: str, *, fleet: bool = False, allow: str = "", json_out: bool = False) -> int:
    return connect_on(
        plane(),
        bootstrap.settings(),
        kubernetes=False,
        url=url,
        fleet=fleet,
        allow=allow,
        json=json_out,
    )


def status() -> dict[str, object]:
    shown: dict[str, object] = json.loads(status_text(bootstrap.settings(), json=True))
    return shown


def listening(pid: int | None = None) -> set[tuple[str, int]]:
    """The TCP and UDP addresses a process listens on (a UDP socket bound for receiving
    counts too)."""
    process = psutil.Process(pid)
    found = set()
    for c in process.net_connections(kind="inet"):
        if c.status == psutil.CONN_LISTEN or (c.status == psutil.CONN_NONE and not c.raddr):
            found.add((c.laddr.ip, c.laddr.port))
    return found


def wait_for(what: str, ready: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"waited too long for {what}"
        time.sleep(0.05)


def test_sign_in_registers_this_installation_and_installs_its_entitlement(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCloud(pro, pending_polls=2)
    with running_fake_cloud(fake) as url:
        assert connect(url) == 0
    out = capsys.readouterr().out.splitlines()
    installation = plane().plans.in_force().installation_id
    assert (
        out[0] == f"To connect, open {url}/device?user_code=WDJB-MJHT and enter the code WDJB-MJHT"
    )
    assert out[2] == (
        f"Connected to Nodeau Cloud at {url} as Test Organisation; installation"
        f" {installation} is registered."
    )
    assert out[3].startswith("Installed the Pro entitlement from the entitlement from Nodeau Cloud")
    assert "Signed in only: nothing is reported (--fleet reports this fleet)." in out
    # what the cloud was told at sign-in: the installation, the machine, the plane, the version
    assert fake.sign_ins == [
        {
            "installation": installation,
            "machine": "testbox",
            "plane": "machine",
            "version": version("nodeau"),
        }
    ]
    # the plan is the entitlement's, verified offline like any other
    now = plane().plans.in_force()
    assert (now.plan, now.reason, now.source) == ("pro", "accepted", f"{home}/entitlement.json")

    shown = status()
    assert (shown["connected"], shown["account"], shown["installation_id"]) == (
        True,
        "Test Organisation",
        installation,
    )
    [token] = fake.tokens
    assert token not in json.dumps(shown)  # the credential is never shown
    assert token not in status_text(bootstrap.settings(), every=True)
    calls = shown["calls"]
    assert isinstance(calls, list)
    assert [c["purpose"] for c in calls] == ["sign-in"] + ["sign-in poll"] * 3
    assert all(c["failure"] is None for c in calls)
    # each call's size is what the cloud received as its body
    assert [c["bytes_sent"] for c in calls] == [n for _, n in fake.bodies]
    assert all(c["bytes_received"] > 0 for c in calls)
    assert shown["totals"]["calls"] == 4  # type: ignore[index]
    association = (home / "cloud" / "association.json").stat().st_mode & 0o777
    assert association == 0o600


@pytest.mark.parametrize(
    ("give", "reason"),
    [
        (lambda i: pro("inst-elsewhere"), "other-installation"),
        (lambda i: pro(i, not_after=datetime(2025, 1, 1, tzinfo=UTC)), "expired"),
        (
            lambda i: document(i, key_id="test-unknown-z", issuer_key_id="test-unknown-z"),
            "unknown-key",
        ),
        (lambda i: b'{"format":1,"key_id":"x"}', "malformed"),
        (
            lambda i: pro(i).replace(b'"signature":"', b'"signature":"AAAA', 1)[:-8] + b'AAAA"}',
            "malformed",
        ),
    ],
)
def test_a_bad_entitlement_from_the_cloud_is_refused_and_the_plan_is_unchanged(
    home: Path, capsys: pytest.CaptureFixture[str], give: object, reason: str
) -> None:
    before = plane().plans.in_force()
    fake = FakeCloud(give)  # type: ignore[arg-type]
    with running_fake_cloud(fake) as url:
        assert connect(url) == 2
    said = capsys.readouterr()
    assert f"The entitlement from Nodeau Cloud was not installed ({reason})." in said.out
    assert said.err.startswith(f"nodeau: entitlement.{reason}: ")
    assert "the plan in force is unchanged" in said.err
    after = plane().plans.in_force()
    assert (after.plan, after.reason, after.source) == (before.plan, "none-present", None)
    assert not (home / "entitlement.json").exists()
    assert status()["connected"] is True  # signed in all the same


@pytest.mark.parametrize("outage", ["down", "error", "slow"])
def test_sign_in_during_an_outage_keeps_nothing_and_status_says_the_call_failed(
    home: Path, capsys: pytest.CaptureFixture[str], outage: str
) -> None:
    fake = FakeCloud(pro)
    if outage == "down":
        assert connect(nowhere()) == 1
    else:
        fake.mode = outage
        with running_fake_cloud(fake) as url:
            assert connect(url) == 1
    err = capsys.readouterr().err
    assert err.startswith("nodeau: not connected: Nodeau Cloud at http://127.0.0.1:")
    assert err.rstrip().endswith("nothing was changed")
    why = {
        "down": "no answer (ConnectError",
        "error": "answered 500",
        "slow": f"timed out after {TIMEOUT_S} s",
    }
    assert why[outage] in err
    shown = status()
    assert shown["connected"] is False
    [failed] = shown["calls"]  # type: ignore[misc]
    assert failed["purpose"] == "sign-in" and why[outage] in failed["failure"]
    assert plane().plans.in_force().reason == "none-present"
    text = status_text(bootstrap.settings())
    assert "Nodeau Cloud: not connected (off: nothing reaches out)" in text
    assert "calls: 1 (1 failed)" in text


def test_a_fleet_runs_only_the_operations_allowed_at_connect_and_records_the_rest(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCloud()
    with running_fake_cloud(fake) as url:
        assert connect(url, fleet=True, allow="drain") == 0
        disconnect_reporter(home)  # this test runs the reporter in process, once
        fake.operations = [
            {"id": "op-1", "kind": "drain", "target": "testbox"},
            {"id": "op-2", "kind": "stop-batch", "target": "job1"},
            {"id": "op-3", "kind": "shell", "target": "rm -rf /"},
            {"id": "op-4", "kind": "drain", "target": "testbox; reboot"},
        ]
        here = plane()
        assert run_on(here, bootstrap.settings(), once=True) == 0
        assert fake.operations == []  # every one was answered
        outcomes = {o["id"]: (o["outcome"], o["verdict"]) for o in fake.outcomes}
        assert outcomes == {
            "op-1": ("done", "allowed"),
            "op-2": ("refused", "not-allowed"),
            "op-3": ("refused", "unknown-operation"),
            "op-4": ("refused", "bad-target"),
        }
        [machine] = here.machines.listing().machines
        assert machine.drained  # the allowed one ran, through the plane
        # the same operation handed out again is never carried out twice
        fake.operations = [{"id": "op-1", "kind": "drain", "target": "testbox"}]
        here.machines.undrain("testbox")
        assert run_on(here, bootstrap.settings(), once=True) == 0
        assert not here.machines.listing().machines[0].drained
        assert [o["id"] for o in fake.outcomes].count("op-1") == 2
        [report, *_] = fake.reports
        assert report["machines"][0]["machine"] == "testbox"
    recorded = status()["operations"]
    assert [(o["id"], o["outcome"]) for o in recorded] == [  # type: ignore[attr-defined]
        ("op-1", "done"),
        ("op-2", "refused"),
        ("op-3", "refused"),
        ("op-4", "refused"),
    ]
    text = status_text(bootstrap.settings())
    assert "refused 'shell': Nodeau Cloud can only ask for drain, undrain, stop-batch," in text


def disconnect_reporter(home: Path) -> None:
    from nodeau.adapters.reporter_process import DetachedReporter

    DetachedReporter().stop(home / "cloud")


def test_connecting_a_fleet_opens_no_listener_and_disconnect_keeps_a_valid_plan(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCloud(pro)
    with running_fake_cloud(fake) as url:
        before = listening()
        assert connect(url, fleet=True, allow="stop-batch") == 0
        assert listening() == before  # this process: nothing new listens
        shown = status()
        pid = shown["reporter_pid"]
        assert isinstance(pid, int)
        wait_for("two reports", lambda: fake.report_count() >= 2)
        assert listening(pid) == set()  # the reporter listens on nothing
        assert "testbox" in json.dumps(fake.reports[-1])

        lines = disconnect_lines(bootstrap.settings())
        assert lines[0] == (
            f"Disconnected from Nodeau Cloud at {url}: the association and its credential"
            " are forgotten, and nothing reaches out any more."
        )
        assert fake.disconnects == [plane().plans.in_force().installation_id]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert status()["connected"] is False
    assert status()["totals"]["calls"] >= 5  # type: ignore[index]  # the record stays
    # the entitlement stays, and applies exactly while it verifies offline
    assert plane().plans.in_force().reason == "accepted"
    s = bootstrap.settings()
    later = datetime.now(UTC) + timedelta(days=30 + 15)
    keys = bootstrap.entitlement_verifier(trusted(KEY_ID))
    expired = MachinePlane(s, LazyMachineParts(s, keys), lambda: later)
    assert (expired.plans.in_force().plan, expired.plans.in_force().reason) == ("home", "expired")


def test_disconnect_while_the_cloud_is_down_forgets_all_the_same(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCloud()
    with running_fake_cloud(fake) as url:
        assert connect(url) == 0
    lines = disconnect_lines(bootstrap.settings())  # the fake is gone now
    assert lines[1].startswith("The cloud was not told (Nodeau Cloud at http://127.0.0.1:")
    assert lines[1].endswith("it is forgotten here all the same.")
    shown = status()
    assert shown["connected"] is False
    assert shown["calls"][-1]["purpose"] == "disconnect"  # type: ignore[index]
    assert disconnect_lines(bootstrap.settings()) == [
        "Not connected to Nodeau Cloud: nothing to forget."
    ]


def test_connect_json_is_one_document_without_the_credential(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCloud(pro)
    with running_fake_cloud(fake) as url:
        assert connect(url, json_out=True) == 0
    said = capsys.readouterr()
    shown = json.loads(said.out)  # the code and the page went to stderr
    assert "enter the code WDJB-MJHT" in said.err
    assert set(shown) == {
        "url", "account", "installation_id", "connected_at", "fleet", "allowed",
        "reporter_pid", "entitlement",
    }  # fmt: skip
    assert (shown["url"], shown["fleet"], shown["reporter_pid"]) == (url, False, None)
    assert shown["entitlement"]["installed"] is True
    assert shown["entitlement"]["plan"]["plan"] == "pro"
    [token] = fake.tokens
    assert token not in said.out
