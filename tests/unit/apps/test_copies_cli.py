"""``nodeau models copy`` / ``nodeau models copies``: what they print, how ``--wait`` ends, and
the one-machine plane's answer (copies are a fleet's)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeau.apps.cli.copies import CopyFailed, CopyGone, listing_lines, wait_until_settled
from nodeau.apps.copies.commands import CopyListing, CopyView

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
QWEN = "a" * 64


def view(
    state: str, sentence: str = "", done: int | None = None, total: int | None = None
) -> CopyView:
    return CopyView(
        machine="garage", model="qwen", artifact=QWEN, state=state, sentence=sentence,
        bytes_done=done, bytes_total=total, asked_by=("person",), requested_at=T0,
        reported_at=T0,
    )  # fmt: skip


class Scripted:
    """Copies that go through these listings, one per read (the last one stays)."""

    def __init__(self, *steps: tuple[CopyView, ...]) -> None:
        self.steps = list(steps)

    def listing(self) -> CopyListing:
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        return CopyListing(plane="fleet", copies=step)


def wait(copies: Scripted) -> CopyView:
    return wait_until_settled(copies, "garage", QWEN, "qwen", sleep=lambda _s: None)  # type: ignore[arg-type]


def test_wait_ends_ready_after_showing_each_state_once(capsys: pytest.CaptureFixture[str]) -> None:
    plane = Scripted(
        (view("requested", "garage's agent takes the request up at its next round"),),
        (view("waiting", "waiting behind llama: one fetch at a time on this machine"),),
        (view("waiting", "waiting behind llama: one fetch at a time on this machine"),),
        (view("fetching", "fetching", 512, 1024),),
        (view("fetching", "fetching", 1024, 1024),),
        (view("verifying", "every byte arrived; each file's SHA-256 is checked"),),
        (view("ready", "verified on garage: every file's SHA-256 checked there"),),
    )
    assert wait(plane).sentence == "verified on garage: every file's SHA-256 checked there"
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[:2] == [
        "garage: requested: garage's agent takes the request up at its next round",
        "garage: waiting: waiting behind llama: one fetch at a time on this machine",
    ]
    assert any(line.startswith("qwen on garage: 512 B of 1.0 KiB (50%)") for line in lines)
    assert lines[-1] == "garage: verifying: every byte arrived; each file's SHA-256 is checked"


def test_wait_fails_with_the_reason() -> None:
    failed = view("failed", "model.gguf: wrong bytes; not retried")
    with pytest.raises(CopyFailed) as raised:
        wait(Scripted((view("fetching", "", 1, 2),), (failed,)))
    assert raised.value.one_line() == (
        "the copy of qwen on garage failed: model.gguf: wrong bytes; not retried"
    )


def test_wait_ends_when_the_request_is_taken_back() -> None:
    with pytest.raises(CopyGone, match="the copy of qwen on garage is no longer asked for"):
        wait(Scripted(()))


def test_the_listing_is_a_table_then_what_each_copy_not_ready_says() -> None:
    listing = CopyListing(
        plane="fleet",
        copies=(
            view("fetching", "fetching from the model's publisher: 50% arrived", 1024, 2048),
            view("ready", "verified on garage"),
        ),
    )
    assert listing_lines(listing) == [
        "MACHINE  MODEL  ARTIFACT      STATE     PROGRESS                    ASKED BY\n"
        "garage   qwen   aaaaaaaaaaaa  fetching  1.00 KiB of 2.00 KiB (50%)  person\n"
        "garage   qwen   aaaaaaaaaaaa  ready     -                           person",
        "now:",
        "  garage/qwen: fetching from the model's publisher: 50% arrived",
    ]


def nodeau(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "nodeau"
    env = {"NODEAU_HOME": str(home), "NODEAU_PLANE": "machine", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=60, check=False, env=env
    )


@pytest.mark.parametrize(
    "args", [("models", "copies"), ("models", "copy", "qwen", "--to", "garage", "--json")]
)
def test_one_machine_keeps_no_copies_and_says_what_it_has_instead(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = nodeau(tmp_path, *args)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "nodeau: copies are kept between the machines of a fleet (nodeau join); this machine's "
        "own models: nodeau model status, nodeau models pull NAME, nodeau models import FILE"
    ]


def test_remove_and_wait_do_not_go_together(tmp_path: Path) -> None:
    done = nodeau(tmp_path, "models", "copy", "qwen", "--to", "garage", "--remove", "--wait")
    assert done.returncode == 1
    assert "--remove takes a request back; there is nothing to --wait for" in done.stderr


def test_the_views_print_the_same_keys_as_json() -> None:
    from nodeau.apps.cli.render import to_json

    listing = CopyListing(plane="fleet", copies=(view("ready", "verified"),))
    [copy] = json.loads(to_json(listing))["copies"]
    assert set(copy) == {
        "machine", "model", "artifact", "state", "sentence", "bytes_done", "bytes_total",
        "asked_by", "requested_at", "reported_at",
    }  # fmt: skip
