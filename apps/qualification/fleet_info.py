"""``nodeau model info`` on a fleet: what the cluster knows of a model, and this machine's copy.

Why it is so: docs/adr/decisions/apps-planes.md (fleet_info.py).
"""

from __future__ import annotations

from nodeau.apps.models.actions import (
    UnknownModel,
    known_here,
    model_description,
    resolve_model,
    verified_summary,
)
from nodeau.apps.models.services import ModelServices
from nodeau.apps.qualification.fleet_qualify import AmbiguousModel, FleetModel, fleet_model
from nodeau.apps.qualification.info_view import THIS_MACHINE, ModelInfoView, info_view, unread_view
from nodeau.domain.allowances import Allowances
from nodeau.domain.artifacts import Sha256
from nodeau.domain.catalog import Catalog, catalog_claims
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.qualification import capability_states, qualified_line
from nodeau.ports.cluster import MachineReport, QualificationRecords


class _Named:
    """The artifact a typed name means on the fleet, and what was found of it."""

    def __init__(self, artifact: str, model: str, names: tuple[str, ...], size_bytes: int) -> None:
        self.artifact = artifact
        self.model = model
        self.names = names
        self.size_bytes = size_bytes


def _named(
    text: str,
    reports: tuple[MachineReport, ...],
    catalog: Catalog,
    here: ModelServices | None,
) -> tuple[_Named, FleetModel | None]:
    try:
        found = fleet_model(text, reports)
    except AmbiguousModel:
        raise  # the fleet's machines disagree: this machine's name would be a guess
    except UnknownModel as missed:
        if here is None:
            raise
        try:
            local = resolve_model(text, here.registry.book(), catalog, here.store.files())
        except UnknownModel:
            raise UnknownModel(f"{missed}, nor among this machine's") from None
        named = _Named(
            local.artifact.id.hex, local.display_name, local.names, local.artifact.size_bytes
        )
        return named, None
    return _Named(found.artifact, found.name, found.names, found.size_bytes), found


def _local_summary(
    artifact: str, catalog: Catalog, here: ModelServices | None
) -> ModelSummary | None:
    """What this machine's verified copy of the artifact declares; None when it holds none.
    A single-file artifact's id is its file's SHA-256, known here or not."""
    if here is None:
        return None
    known = known_here(here.registry.book(), catalog).get(Sha256(hex=artifact))
    first = Sha256(hex=artifact) if known is None else known.files[0].sha256
    return verified_summary(first, here.store, here.inspector)


def fleet_model_info(
    text: str,
    *,
    reports: tuple[MachineReport, ...],
    records: QualificationRecords,
    catalog: Catalog,
    here: ModelServices | None,
) -> ModelInfoView:
    """``nodeau model info TEXT`` on the fleet (``here``: this machine's models, None when
    this command has no access to them)."""
    named, on_fleet = _named(text, reports, catalog, here)
    evidence = records.evidence().for_artifact(Sha256(hex=named.artifact))
    table = records.measurements()
    claims = catalog_claims(catalog, named.artifact)
    summary = _local_summary(named.artifact, catalog, here)
    source, note = THIS_MACHINE, None
    if summary is None and on_fleet is not None:
        summary = on_fleet.summary
        source = f"{on_fleet.machine}'s verified copy (its agent's report)"
        note = (
            f"this machine holds no verified copy of {named.model}: its architecture values "
            f"are those {on_fleet.machine} read from its own and reported"
        )
    if summary is None:
        return unread_view(
            model=named.model,
            names=named.names,
            artifact_id=named.artifact,
            size_bytes=named.size_bytes,
            table=table,
            capabilities=capability_states(evidence, claims),
            qualified=None if evidence is None else qualified_line(evidence),
            note=(
                f"neither this machine nor any machine of the fleet holds a verified copy of "
                f"{named.model}, so its architecture values and estimated peaks cannot be "
                "read; pull or import it"
            ),
        )
    described = model_description(
        artifact_id=named.artifact,
        size_bytes=named.size_bytes,
        summary=summary,
        table=table,
        evidence=evidence,
        catalog_capabilities=claims,
        allowances=Allowances(),
    )
    return info_view(
        described,
        model=named.model,
        names=named.names,
        table=table,
        architecture_from=source,
        note=note,
    )
