"""``nodeau models ...`` and ``nodeau model ...``: model files on this machine.

``models`` fetches and imports; ``model`` reports on, verifies and describes
what this machine holds. Every listing has ``--json``. Exit codes: 0 when the
command did what was asked, 1 with a one-line reason otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from cyclopts import App, Parameter

from nodeau.apps import model_services as services
from nodeau.apps.cli.bootstrap import settings
from nodeau.apps.cli.render import size, table, to_json

models_app = App(name="models", help="Fetch catalog models and import your own GGUF files.")
model_app = App(name="model", help="What this machine holds: status, verification, details.")


@models_app.command
def pull(name: str, /, *, json: bool = False) -> int:
    """Fetch a catalog model from its publisher at its pinned revision, checking every SHA-256.

    Parameters
    ----------
    name
        The catalog name of the model.
    json
        Print the result as JSON.
    """
    from nodeau.apps.models import pull_model

    s = services.build(settings())
    report = pull_model(
        name,
        catalog=s.catalog(),
        store=s.store,
        publisher=s.publisher(),
        registry=s.registry,
        url_for=s.url_for,
        progress_for=s.progress_for,
        on_wait=lambda sentence: print(sentence, file=sys.stderr, flush=True),
    )
    if json:
        print(to_json(report))
        return 0
    for f in report.already_verified:
        print(f"{f.path}: already held and verified here ({f.sha256.short})")
    for c in report.fetched:
        print(f"{c.sha256.short}: fetched {size(c.size_bytes)}, SHA-256 matches: verified")
    print(f"{report.entry.name} is verified on {s.settings.machine}")
    return 0


@models_app.command(name="import")
def import_(
    path: Path,
    /,
    *,
    alias: str | None = None,
    register: Annotated[bool, Parameter(negative="--no-register")] = True,
    json: bool = False,
) -> int:
    """Import a GGUF file you have: hash it, keep a verified copy, name it by an alias.

    The file is hard-linked into the model cache where possible (else copied);
    it is never moved or changed.

    Parameters
    ----------
    path
        The GGUF file.
    alias
        The name to run it by (default: the file name without .gguf).
    register
        Register the model under its alias. ``--no-register`` only counts this
        machine's copy of a model already known elsewhere.
    json
        Print the result as JSON.
    """
    from nodeau.apps.models import import_model

    s = services.build(settings())
    report = import_model(
        path,
        alias=alias,
        register=register,
        inspector=s.inspector,
        store=s.store,
        registry=s.registry,
    )
    if json:
        print(to_json(report))
        return 0
    how = "hard link" if report.imported.linked else "copy"
    print(
        f"artifact {report.imported.sha256.hex} ({size(report.imported.size_bytes)}, "
        f"{report.summary.architecture.name}, {report.summary.quantisation}) stored as a {how}: "
        "verified"
    )
    if report.outcome is not None:
        print(report.outcome.sentence)
    return 0


@model_app.command
def status(*, json: bool = False) -> int:
    """Which models this machine holds: downloaded and verified are separate columns.

    Parameters
    ----------
    json
        Print the rows as JSON.
    """
    from nodeau.apps.cli.status_rows import status_rows

    s = services.build(settings())
    rows = status_rows(s.store.files(), s.registry.book(), s.catalog(), s.settings.machine)
    if json:
        print(to_json(rows))
        return 0
    print(
        table(
            ("MACHINE", "MODEL", "ARTIFACT", "SIZE", "DOWNLOADED", "VERIFIED"),
            [
                (
                    r.machine,
                    ", ".join(r.names) or "-",
                    r.sha256[:12],
                    size(r.size_bytes),
                    r.downloaded,
                    r.verified,
                )
                for r in rows
            ],
        )
    )
    return 0


@model_app.command
def verify(model: str, /, *, json: bool = False) -> int:
    """Re-read this machine's copy of a model and recompute every SHA-256.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id (or a prefix of six or more digits).
    json
        Print the result as JSON.
    """
    from nodeau.apps.models import resolve_model, verify_model

    s = services.build(settings())
    resolved = resolve_model(model, s.registry.book(), s.catalog())
    results = verify_model(resolved, s.store)
    if json:
        print(to_json(results))
    else:
        for r in results:
            print(f"{r.sha256.short}: {r.state.value}")
    return 0 if all(r.verified for r in results) else 1


@model_app.command
def info(model: str, /, *, json: bool = False) -> int:
    """Architecture values, size, predicted peak VRAM (estimated) and measured configurations.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id (or a prefix of six or more digits).
    json
        Print the result as JSON.
    """
    from nodeau.apps.cli.info_text import info_lines
    from nodeau.apps.models import describe_model, resolve_model

    s = services.build(settings())
    resolved = resolve_model(model, s.registry.book(), s.catalog())
    described = describe_model(
        resolved,
        store=s.store,
        inspector=s.inspector,
        registry=s.registry,
        allowances=s.settings.allowances,
    )
    if json:
        print(to_json(described))
        return 0
    print("\n".join(info_lines(described, resolved.names)))
    return 0
