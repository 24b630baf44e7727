"""The ``nodeau`` command: a thin cyclopts shell.

Why it is so: docs/adr/decisions/apps-cli.md (main.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, NoReturn

from nodeau.adapters.private_files import keep_private
from nodeau.apps.cli.ps_command import fast_json, ps
from nodeau.apps.settings import data_home
from nodeau.ports.errors import NodeauError

if TYPE_CHECKING:
    from cyclopts import App

HELP = "Run LLM inference on your own GPU machines, admitted by predicted peak VRAM."
STDOUT_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for `ls | head`


def installed_version() -> str:
    from importlib.metadata import version  # 10 ms: only --version pays it

    return version("nodeau")


@cache
def build_app() -> App:
    """The cyclopts app with every command registered (built once)."""
    from cyclopts import App

    app = App(name="nodeau", help=HELP, version=installed_version)
    app.command(  # one group, either spelling (the help shows "models (model)")
        "nodeau.apps.cli.models:models_app",
        name="models",
        alias="model",
        help="Model files on this machine: fetch, import, list, verify, describe, qualify, delete.",
    )
    for command, words in (
        ("run", "Admit, place and serve a model on this machine, behind a loopback endpoint."),
        ("ps", "Every workload holding a GPU, with its state and what happens next."),
        ("stop", "Stop a workload's endpoint (--workload: the model too, freeing its card)."),
        ("environment", "What this machine has, read-only."),
    ):
        module = "environment" if command == "environment" else "serving"
        app.command(f"nodeau.apps.cli.{module}:{command}", name=command, help=words)
    for group, words in (
        ("service", "Explain a service's admission."),
        ("placement", "Explain a workload's placement."),
        ("fleet", "The machines Nodeau can place work on."),
    ):
        app.command(f"nodeau.apps.cli.serving:{group}_app", name=group, help=words)
    app.command(
        "nodeau.apps.cli.completion:completion",
        name="completion",
        help="Shell completion for nodeau: print the script (bash, zsh, fish) or install it.",
    )
    app.command(
        "nodeau.apps.cli.server:server_app",
        name="server",
        help="The model server Nodeau runs: build it for this machine, list builds.",
    )
    app.command(
        "nodeau.apps.cli.logs:logs",
        name="logs",
        help="The last lines of a workload's model server log.",
    )
    app.command(
        "nodeau.apps.cli.batch:batch_app",
        name="batch",
        help="Run a finite set of requests (OpenAI batch JSONL), then free the card.",
    )
    app.command(
        "nodeau.apps.cli.scheduling:scheduling_app",
        name="scheduling",
        help="Drain machines and choose the scheduling policy; new placements only.",
    )
    app.command(
        "nodeau.apps.cli.recovery:recovery_app",
        name="recovery",
        help="Choose what a service does when its machine stops answering; see every choice.",
    )
    app.command(
        "nodeau.apps.cli.plan:plan_app",
        name="plan",
        help="The plan in force and why; install or remove a signed entitlement.",
    )
    app.command(
        "nodeau.apps.cli.dashboard:dashboard",
        name="dashboard",
        help="Start (or find) the local dashboard on 127.0.0.1; its address with a fresh token.",
    )
    app.command(
        "nodeau.apps.cli.gateway:gateway",
        name="gateway",
        help="One loopback address for every model served here, routed by the request's model.",
    )
    app.command(
        "nodeau.apps.cli.cloud:cloud_app",
        name="cloud",
        help="Nodeau Cloud, optional and off by default: connect, see every call, disconnect.",
    )
    app.command(
        "nodeau.apps.cli.organisation:organisation_app",
        name="organisation",
        help="Roles, limits and quotas: the policy in force, who you are under it; install it.",
    )
    app.command(
        "nodeau.apps.cli.cluster_join:join",
        name="join",
        help="Join this machine to a fleet on Kubernetes (see nodeau fleet invite).",
    )
    return app


def run(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: expected failures (``NodeauError``) print one line, never a
    traceback; anything else is a bug and keeps its traceback.

    ``argv`` defaults to ``sys.argv[1:]``; the process exits with the command's code.
    """
    tokens = list(sys.argv[1:] if argv is None else argv)
    previous_umask = keep_private(data_home(os.environ))  # before anything is written: ADR 0021
    try:
        json = fast_json(tokens)
        if json is not None:
            sys.exit(ps(json=json))
        build_app()(tokens)
    except BrokenPipeError:
        stdout_closed()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if not isinstance(exc, NodeauError):
            raise  # a bug deserves its traceback
        from nodeau.ports.organisation import NotAllowed  # a policy's types: on refusal only

        if isinstance(exc, NotAllowed):  # a refusal: its kind, code and sentence, exit 2
            print(exc.one_line(), file=sys.stderr)
            sys.exit(2)
        print(f"nodeau: {exc.one_line()}", file=sys.stderr)
        sys.exit(1)
    finally:
        os.umask(previous_umask)  # run() is also called in-process (nodeau.apps.cloud, tests)
        try:
            sys.stdout.flush()  # output still buffered meets a closed pipe here, not at exit
        except BrokenPipeError:
            stdout_closed()


def stdout_closed() -> NoReturn:
    """End quietly, as ``ls | head`` does, when whoever reads stdout stopped reading: no
    traceback and no message; stdout is pointed at /dev/null so that nothing flushed at
    exit fails again (the recipe of Python's ``signal`` documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(STDOUT_CLOSED)
