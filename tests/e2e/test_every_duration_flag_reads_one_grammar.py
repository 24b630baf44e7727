"""Every flag taking a duration (``--after``, ``--ttl``) reads the same forms through the
installed ``nodeau``, and junk is one line naming the flag and the forms accepted, exit 1,
with nothing created."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.real.cli import Cli

FORMS = "give whole numbers with d, h, m or s, largest first (e.g. 90s, 3m, 1h30m, 2d)"


@pytest.mark.parametrize(
    ("flag", "command"),
    [
        ("--after", ("run", "tiny", "--recovery", "automatic", "--after")),
        ("--after", ("recovery", "set", "tiny", "automatic", "--after")),
        ("--ttl", ("fleet", "invite", "--ttl")),
    ],
)
@pytest.mark.parametrize("junk", ["3x", "1.5h", "24"])
def test_junk_is_one_line_naming_the_flag_and_the_forms(
    tmp_path: Path, flag: str, command: tuple[str, ...], junk: str
) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    done = cli(*command, junk)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"nodeau: {flag} {junk!r} is not a duration: {FORMS}\n"
    assert not (tmp_path / "home" / "state.sqlite3").exists()


def test_a_compound_delay_gets_past_the_flag_to_the_model(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    done = cli("run", "nosuch", "--recovery", "automatic", "--after", "1h30m")
    assert done.returncode == 1
    assert "nosuch" in done.stderr and "duration" not in done.stderr
