"""``nodeau completion SHELL`` as a user loads it: the bash script, sourced in a real bash,
completes commands, subcommands and flags; ``--install`` writes it under the user's home
and loads it from the shell's startup file; zsh and fish get scripts of their own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.real.cli import Cli


def completed(script: str, words: list[str]) -> list[str]:
    """What bash offers for the last of ``words``, the script's function run as bash does."""
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
        f'COMP_LINE="{line}"; COMP_POINT={len(line)}\n'
        f"_nodeau nodeau {words[-1]} {words[-2]}\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.fixture
def bash_script(tmp_path: Path) -> str:
    done = Cli(tmp_path / "home")("completion", "bash")
    assert done.returncode == 0, done.stderr
    script = tmp_path / "nodeau.bash"
    script.write_text(done.stdout)
    return str(script)


def test_bash_completes_commands_subcommands_and_flags(bash_script: str) -> None:
    assert completed(bash_script, ["nodeau", "mo"]) == ["models", "model"]
    assert "rm" in completed(bash_script, ["nodeau", "models", "r"])
    assert {"--json", "--output"} <= set(completed(bash_script, ["nodeau", "ps", "--"]))
    assert "--workload" in completed(bash_script, ["nodeau", "stop", "--w"])


def test_install_writes_the_script_under_home_and_loads_it_at_startup(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "nodeau-home")
    cli.env.update(HOME=str(tmp_path), SHELL="/bin/bash")
    done = cli("completion", "bash", "--install")
    assert done.returncode == 0, done.stderr
    installed = tmp_path / ".local" / "share" / "bash-completion" / "completions" / "nodeau"
    assert f"installed bash completion for nodeau in {installed}" in done.stdout
    assert "complete -F _nodeau nodeau" in installed.read_text()
    assert str(installed) in (tmp_path / ".bashrc").read_text()


@pytest.mark.parametrize(
    ("shell", "says"), [("zsh", "#compdef nodeau"), ("fish", "complete -c nodeau")]
)
def test_zsh_and_fish_get_scripts_of_their_own(tmp_path: Path, shell: str, says: str) -> None:
    done = Cli(tmp_path / "home")("completion", shell)
    assert done.returncode == 0 and says in done.stdout


def test_an_unknown_shell_is_one_usage_error(tmp_path: Path) -> None:
    done = Cli(tmp_path / "home")("completion", "tcsh")
    assert done.returncode != 0 and "Traceback" not in done.stderr + done.stdout
