"""Imports sit at the top of every apps module, but where a light path needs them deferred.

The modules allowed to import inside a function are the ones ``nodeau ps``, ``--help`` and
a one-machine endpoint load (docs/adr/0029-adapters-are-composed.md); anywhere else an
import inside a function fails here, and ``nodeau ps`` on a new home stays a small graph.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

APPS = Path(__file__).resolve().parents[3] / "apps"

# module -> why it may defer an import (each reason is ADR 0029's)
LIGHT_PATHS = {
    "cli/bootstrap.py": "builds each machine adapter on first use; Kubernetes only on a fleet",
    "cli/main.py": "importlib.metadata for --version; a policy's types on a refusal",
    "cli/render.py": "cattrs only when JSON is printed",
    "cli/ps_command.py": "the model-server words only for a simulated card",
    "planes/machine_workloads.py": "the state port's records only when servers are unknown",
    "endpoint/bootstrap.py": "the Kubernetes client only for a fleet's workload",
    "endpoint/__main__.py": "the Kubernetes client only for a fleet's workload",
}


def deferred_imports(path: Path) -> list[int]:
    """The lines of the imports written inside a function of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines.update(
                n.lineno for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
            )
    return sorted(lines)


def test_only_the_light_paths_import_inside_a_function() -> None:
    found = {
        path.relative_to(APPS).as_posix(): deferred_imports(path)
        for path in sorted(APPS.rglob("*.py"))
    }
    elsewhere = {m: lines for m, lines in found.items() if lines and m not in LIGHT_PATHS}
    assert elsewhere == {}
    assert all(found[m] for m in LIGHT_PATHS if m in found), "a light path that no longer defers"


def test_ps_on_a_new_home_imports_no_adapter_of_the_model_side(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from nodeau.apps.cli.main import run\n"
        "try:\n    run(['ps'])\nexcept SystemExit:\n    pass\n"
        "print('LOADED', *sorted(m for m in sys.modules if m.startswith('nodeau.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={"NODEAU_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    last = done.stdout.splitlines()[-1].split()
    assert last[0] == "LOADED"
    loaded = set(last[1:])
    heavy = {"nodeau.apps.models.bootstrap", "nodeau.adapters.gguf_inspector"}
    assert loaded & heavy == set()
    assert "nodeau.apps.cli.ps_command" in loaded
    assert not any(m.startswith("nodeau.adapters.kube") for m in loaded)
