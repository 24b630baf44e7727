"""``nodeau models catalog list|add``: the catalog in force, and a person's own entry added
from a GGUF they hold, its size and SHA-256 computed here (docs/catalog-format.md).
"""

from __future__ import annotations

from pathlib import Path

from cyclopts import App

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import size, table, to_json
from nodeau.apps.models.catalog_add import add_to_catalog

catalog_app = App(name="catalog", help="The catalog of models Nodeau fetches: list it, add yours.")


@catalog_app.command(name="list")
def list_(*, json: bool = False) -> int:
    """Every entry of the catalog in force: name, size, what it claims, where it is from.

    Parameters
    ----------
    json
        Print the entries as JSON.
    """
    entries = bootstrap.model_services().catalog().entries
    if json:
        print(to_json(entries))
        return 0
    rows = [
        (
            e.name,
            size(e.entry.artifact().size_bytes),
            ", ".join(t.value for t in e.tasks),
            e.summary.quantisation,
            e.entry.source,
        )
        for e in entries
    ]
    print(table(("NAME", "SIZE", "TASKS", "QUANTISATION", "FROM"), rows))
    return 0


@catalog_app.command
def add(
    path: Path,
    /,
    *,
    name: str,
    repo: str,
    revision: str,
    file: str | None = None,
    publisher: str | None = None,
    parameters: str | None = None,
    json: bool = False,
) -> int:
    """Add your own catalog entry for a GGUF file you hold, as its publisher lists it.

    Its size and SHA-256 are computed from the file here, and its summary is read from it.
    It claims the tasks and capabilities that qualification proved on these bytes on this
    machine (import it and run nodeau model qualify first), nothing else. The entry goes to
    the file NODEAU_CATALOG names, else to catalog.json in Nodeau's home, read over the
    catalog shipped with Nodeau; nodeau models pull NAME then fetches it from the publisher
    and checks every byte.

    Parameters
    ----------
    path
        The GGUF file.
    name
        The entry's name (what nodeau run and nodeau models pull take).
    repo
        The publisher's repository (OWNER/NAME), where the file is fetched from.
    revision
        The 40-hex commit id the file is pinned to (a branch or a tag can move).
    file
        The file's path in the repository (default: its name here).
    publisher
        Who publishes it (default: the repository's owner).
    parameters
        The parameter count as the publisher states it, e.g. 135M (default: not stated).
    json
        Print the entry as JSON.
    """

    s = bootstrap.model_services()
    entry = add_to_catalog(
        path,
        name=name,
        repo=repo,
        revision=revision,
        publisher=publisher,
        file_path=file,
        parameters=parameters,
        models=s,
    )
    if json:
        print(to_json(entry))
        return 0
    [f] = entry.entry.files
    tasks = ", ".join(t.value for t in entry.tasks)
    where = f"{f.path} ({size(f.size_bytes)}, sha256 {f.sha256.hex})"
    print(f"{entry.name}: {where} from {entry.entry.source}")
    kept = s.settings.own_catalog
    print(f"{entry.name}: claims {tasks} (proved by qualification here); kept in {kept}")
    return 0
