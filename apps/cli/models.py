"""``nodeau models ...``, also spelled ``nodeau model ...``: model files on this machine.

Why it is so: docs/adr/decisions/apps-cli.md (models.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from cyclopts import App, Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.copies import listing_lines, wait_until_settled
from nodeau.apps.cli.info_text import info_lines
from nodeau.apps.cli.qualify_text import qualification_lines
from nodeau.apps.cli.render import size, table, to_json
from nodeau.apps.cli.serving import report_refusal
from nodeau.apps.models.actions import import_model, pull_model, resolve_model, verify_model
from nodeau.apps.serving.commands import Refused
from nodeau.domain.catalog import Catalog
from nodeau.ports.errors import SettingsError
from nodeau.ports.models import CatalogError

if TYPE_CHECKING:
    from collections.abc import Callable

    from nodeau.ports.models import ImportProgress

GROUP_HELP = "Model files on this machine: fetch, import, list, verify, describe, qualify, delete."
models_app = App(name="models", help=GROUP_HELP)
models_app.command("nodeau.apps.cli.model_files:list_", name="list")
models_app.command("nodeau.apps.cli.model_files:rm", name="rm")
models_app.command("nodeau.apps.cli.catalog:catalog_app", name="catalog")


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

    s = bootstrap.model_services()
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


@models_app.command(name="copy")
def copy_(
    model: str, /, *, to: str, wait: bool = False, remove: bool = False, json: bool = False
) -> int:
    """Ask a machine of the fleet to keep a verified copy of a model.

    The machine's agent fetches the files from the model's publisher and checks every
    file's SHA-256 itself; the copy is ready only once every file is verified there. An
    imported model is never fetched: import the same file on that machine with
    ``nodeau models import FILE --no-register``.

    Parameters
    ----------
    model
        A catalog name, an alias a machine knows, an artifact id or a prefix of six or
        more digits.
    to
        The machine (a node of the fleet).
    wait
        Wait until the copy is verified (exit 0) or failed (exit 1, with its reason).
    remove
        Take your request back. No file is deleted, and a copy a workload's recovery
        relies on stays.
    json
        Print the copy as JSON (with ``--wait``, the copy once it is ready).
    """

    if remove and wait:
        raise SettingsError("--remove takes a request back; there is nothing to --wait for")
    fleet = bootstrap.plane()
    catalog = _fleet_catalog()
    if remove:
        print(fleet.copies.withdraw(model, to, catalog))
        return 0
    asked = fleet.copies.request(model, to, catalog)
    if not wait:
        print(to_json(asked) if json else asked.sentence)
        return 0

    print(asked.sentence, file=sys.stderr if json else sys.stdout, flush=True)
    copy = asked.copy
    ready = wait_until_settled(fleet.copies, copy.machine, copy.artifact, copy.model)
    print(to_json(ready) if json else f"{ready.model}: {ready.sentence}")
    return 0


@models_app.command
def copies(*, json: bool = False) -> int:
    """Every copy on the fleet: machine, model, state, progress, and who asked.

    A state is requested, waiting (behind another fetch on that machine), fetching,
    verifying, ready (every file verified there) or failed (with its reason; a failed
    copy is not retried until its request is taken back and made again).

    Parameters
    ----------
    json
        Print the copies as JSON.
    """

    listing = bootstrap.plane().copies.listing()
    if json:
        print(to_json(listing))
        return 0
    print("\n".join(listing_lines(listing)))
    return 0


def _fleet_catalog() -> Catalog:
    """The catalog this command reads: names for models no machine holds yet. Unreadable,
    it is said once and left out (the machines' agents fetch by their own)."""

    try:
        return bootstrap.model_services().catalog()
    except CatalogError as exc:
        print(f"nodeau: catalog not read, its names are left out: {exc}", file=sys.stderr)
        return Catalog(entries=())


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

    s = bootstrap.model_services()
    with bootstrap.build_progress() as shown:
        report = import_model(
            path,
            alias=alias,
            register=register,
            inspector=s.inspector,
            store=s.store,
            registry=s.registry,
            progress=_for_a_large_file(path, shown),
        )
    if json:
        print(to_json(report))
        return 0
    how = "hard link" if report.imported.linked else "copy"
    summary = report.summary
    print(
        f"artifact {report.imported.sha256.hex} ({size(report.imported.size_bytes)}, "
        f"{summary.architecture.name}, {summary.quantisation_label}) stored as a {how}: verified"
    )
    if report.outcome is not None:
        print(report.outcome.sentence)
    return 0


# a file this large shows its import's progress (hashing, then copying where no hard link
# can be made): a 4 GiB GGUF takes seconds to hash, and a silent terminal looks stuck
LARGE_IMPORT_BYTES = 128 * 1024**2


def _for_a_large_file(
    path: Path, shown: Callable[[str, float, float | None], None]
) -> ImportProgress | None:
    """``shown`` for the import of ``path`` when the file is large, naming the file in each
    step; None for a small one (nothing worth a bar) or one that cannot be read (the
    import says why)."""
    try:
        large = path.stat().st_size >= LARGE_IMPORT_BYTES
    except OSError:
        return None
    if not large:
        return None
    return lambda step, done, total: shown(f"{step} {path.name}", done, total)


@models_app.command
def status(*, json: bool = False) -> int:
    """Which machine holds which models: downloaded and verified are separate columns.

    On one machine, its own cache. On a fleet, every machine's copies as its agent last
    reported them (verified ones say when), with each copy being fetched or verified.

    Parameters
    ----------
    json
        Print the rows as JSON.
    """

    rows = bootstrap.plane().model_status()
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


@models_app.command
def verify(model: str, /, *, json: bool = False) -> int:
    """Re-read this machine's copy of a model and recompute every SHA-256.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id (or a prefix of six or more digits).
    json
        Print the result as JSON.
    """

    s = bootstrap.model_services()
    resolved = resolve_model(model, s.registry.book(), s.catalog(), s.store.files())
    results = verify_model(resolved, s.store)
    if json:
        print(to_json(results))
    else:
        for r in results:
            print(f"{r.sha256.short}: {r.state.value}")
    return 0 if all(r.verified for r in results) else 1


@models_app.command
def qualify(
    model: str, /, *, context: int | None = None, seed: int | None = None, json: bool = False
) -> int:
    """Prove what a model can do: start it by the normal admission, watch its memory, probe
    chat, embed, rerank, tools, structured-output and vision-input, and stop it.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id held verified on this machine.
    context
        Context size in tokens (default: the model's own, at most 4096).
    seed
        Draw the probes' content from this number, to repeat a run exactly (default: a
        fresh one each run; the result shows it).
    json
        Print the result as JSON.
    """

    if context is not None and context <= 0:
        raise SettingsError("--context must be a positive number of tokens")
    if seed is not None and not 0 <= seed < 2**32:
        raise SettingsError("--seed must be a whole number from 0 to 4294967295")
    done = bootstrap.plane().qualification.qualify(model, context, seed)
    if isinstance(done, Refused):
        return report_refusal(done.refusal)
    print(to_json(done) if json else "\n".join(qualification_lines(done)))
    return 0


@models_app.command
def info(model: str, /, *, json: bool = False) -> int:
    """Architecture values, size, predicted peak VRAM (estimated), measured configurations
    and each capability's state; on a fleet, what the cluster knows of it.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id (or a prefix of six or more digits).
    json
        Print the result as JSON.
    """

    described = bootstrap.plane().qualification.info(model)
    print(to_json(described) if json else "\n".join(info_lines(described)))
    return 0
