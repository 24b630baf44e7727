"""llama.cpp's own memory estimate of a configuration: ``llama-fit-params``, a second opinion.

The fit tool beside a llama-server projects what a configuration uses from the model's
metadata alone (``projected to use N MiB of host|device memory``). It takes no task flags,
so an embedding model's output buffer is not in it; admission never uses it.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

from nodeau.adapters.llama_server import server_command
from nodeau.ports.runtime import FitEstimate, ServerSpec

FIT = "llama-fit-params"
TIMEOUT_S = 120.0
_MIB = 1024 * 1024
_PROJECTED = re.compile(r"projected to use (\d+) MiB of (host|device) memory")
_TAKES_VALUE = frozenset(
    {
        "--model", "--ctx-size", "--parallel", "--batch-size", "--ubatch-size",
        "--cache-type-k", "--cache-type-v", "--flash-attn", "--n-gpu-layers",
    }
)  # fmt: skip


def fit_binary(server: Path) -> Path | None:
    """The fit tool beside ``server`` (None: it has none)."""
    beside = server.parent / FIT
    return beside if beside.is_file() else None


def fit_command(fit: Path, spec: ServerSpec) -> list[str]:
    """The fit tool's command for the configuration ``server_command`` would serve."""
    served = server_command(Path("llama-server"), spec, 0)[1:]
    kept: list[str] = []
    for at, flag in enumerate(served):
        if flag in _TAKES_VALUE:
            kept += [flag, served[at + 1]]
    return [str(fit), *kept, "--log-verbosity", "4"]


def runtime_estimate(
    server: Path, spec: ServerSpec, environ: Mapping[str, str]
) -> FitEstimate | str:
    """llama.cpp's estimate of ``spec`` through the fit tool beside ``server``, or why there
    is none (one line)."""
    fit = fit_binary(server)
    if fit is None:
        return f"no {FIT} beside {server}"
    try:
        done = subprocess.run(
            fit_command(fit, spec),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
            env=dict(environ),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{fit} did not answer: {exc}"
    said = _PROJECTED.search(done.stdout + done.stderr)
    if said is None:
        last = ((done.stderr or done.stdout).strip().splitlines() or ["nothing"])[-1]
        return f"{fit} gave no estimate (exit {done.returncode}): {last}"
    return FitEstimate(bytes=int(said.group(1)) * _MIB, where=said.group(2), tool=str(fit))


@frozen
class FitTool:
    """``FitEstimates`` through ``llama-fit-params``, run with this machine's environment and
    only the spec's card visible (none: on the CPU)."""

    environ: Mapping[str, str]

    def estimate(self, server: Path, spec: ServerSpec) -> FitEstimate | str:
        shown = {**self.environ, "CUDA_VISIBLE_DEVICES": spec.visible_cards or ""}
        return runtime_estimate(server, spec, shown)
