"""``nodeau server install|list``: the model server that comes with Nodeau.

``install`` builds llama-server from the pinned llama-cpp-python sdist into the user's
cache, for CUDA where this machine has NVIDIA cards (or ``--cuda-arch``), else the CPU, and
says what it built; ``list`` shows the builds and which server ``nodeau run`` starts.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

from cyclopts import App, Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.environment import server_line
from nodeau.apps.cli.render import table, to_json
from nodeau.domain.model_server import install_choice
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from nodeau.ports.server_install import BuiltServer

server_app = App(name="server", help="The model server Nodeau runs: install it, list builds.")


@server_app.command(name="install")
def install(
    *,
    cuda: Annotated[bool, Parameter(negative="")] = False,
    cpu: Annotated[bool, Parameter(negative="")] = False,
    cuda_arch: str | None = None,
    jobs: int | None = None,
    fetch_only: Annotated[bool, Parameter(negative="")] = False,
    json: bool = False,
) -> int:
    """Build llama.cpp's llama-server into your cache (reused once built).

    With neither --cuda nor --cpu: CUDA for this machine's NVIDIA cards when it has any,
    else the CPU. A CPU build takes about 5-10 minutes on 2 cores, a CUDA build for one
    architecture about 45 (docs/adr/0019 has the figures).

    Parameters
    ----------
    cuda
        Build for NVIDIA cards (CUDA): those of this machine, or --cuda-arch.
    cpu
        Build for the CPU only.
    cuda_arch
        Compute capabilities to build for, comma separated (e.g. 80,86,89,90); implies --cuda.
    jobs
        Compiles run at once (default: one per core).
    fetch_only
        Fetch and check what the build needs (the sources; for CUDA the toolkit), build
        nothing: to build later without a network.
    json
        Print what was built as JSON.
    """

    if jobs is not None and jobs < 1:
        raise SettingsError(f"--jobs {jobs}: give a positive number")
    s = bootstrap.settings()
    choice = install_choice(
        cpu=cpu, cuda=cuda, archs=cuda_arch, cards=bootstrap.card_capabilities(s)
    )
    if isinstance(choice, str):
        raise SettingsError(choice)
    builder = bootstrap.server_installer(jobs)
    print(f"nodeau server install: {choice.why}", file=sys.stderr)
    if fetch_only:
        with bootstrap.build_progress() as progress:
            fetched = builder.prepare(choice.ask, progress)
        if json:
            print(to_json({"sources": str(fetched.sources), "toolkit": fetched.toolkit}))
        else:
            print(f"fetched and checked, nothing built: llama.cpp sources in {fetched.sources}")
            if fetched.toolkit:
                print(f"  toolkit  {fetched.toolkit}")
        return 0
    with bootstrap.build_progress() as progress:
        built = builder.install(choice.ask, progress)
    if json:
        print(to_json(built))
        return 0
    print("\n".join(built_lines(built)))
    return 0


@server_app.command(name="list")
def list_builds(*, json: bool = False) -> int:
    """The builds `nodeau server install` made, and which model server `nodeau run` starts.

    Parameters
    ----------
    json
        Print the builds as JSON.
    """

    builds = bootstrap.server_installer(None).builds()
    if json:
        print(to_json(builds))
        return 0
    rows = [
        (b.flavour, b.version, ", ".join(b.backends) or "CPU only", b.built_at, b.binary)
        for b in builds
    ]
    print(table(("BUILD", "VERSION", "BACKENDS", "BUILT", "BINARY"), rows))
    print(f"nodeau run starts: {server_line()}")
    return 0


def built_lines(built: BuiltServer) -> list[str]:
    """What an install says it built (or found built)."""
    target = "the CPU" if built.backend == "cpu" else f"CUDA {', '.join(built.cuda_archs)}"
    if built.reused:
        head = f"already built for {target} (built {built.built_at}, reused: nothing compiled)"
    else:
        head = f"built llama-server for {target} in {_minutes(built.build_seconds)}"
    lines = [
        head,
        f"  binary       {built.binary}",
        f"  llama.cpp    {built.llama_cpp_commit} (vendored by llama-cpp-python "
        f"{built.llama_cpp_python}, its sdist's SHA-256 pinned)",
        f"  version      {built.version}",
        f"  backends     {', '.join(built.backends) or 'CPU only'}",
    ]
    if built.toolkit:
        lines.append(f"  toolkit      {built.toolkit}")
    if built.memory_pool:
        lines.append(f"  memory pool  {built.memory_pool}")
    return lines


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
