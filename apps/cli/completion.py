"""``nodeau completion SHELL``: the shell's completion script for every command and flag,
printed (``source <(nodeau completion bash)``, as kubectl does) or installed with
``--install``. cyclopts writes the script from the same app that parses the command line.
"""

from __future__ import annotations

from typing import Literal

from nodeau.apps.cli.main import build_app


def completion(shell: Literal["bash", "zsh", "fish"], /, *, install: bool = False) -> int:
    """Shell completion for nodeau: print the script, or install it with --install.

    Load it in the current shell with ``source <(nodeau completion bash)`` (zsh:
    ``source <(nodeau completion zsh)``; fish: ``nodeau completion fish | source``).

    Parameters
    ----------
    shell
        The shell to complete in.
    install
        Write the script where the shell looks for completions and add one line that loads
        it to the shell's startup file; both paths are printed.
    """
    app = build_app()
    if not install:
        print(app.generate_completion(prog_name="nodeau", shell=shell))
        return 0
    path = app.install_completion(shell=shell)
    print(f"installed {shell} completion for nodeau in {path}; a new shell loads it")
    return 0
