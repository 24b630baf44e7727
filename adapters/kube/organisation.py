"""The fleet's organisation policy: ConfigMap nodeau-organisation in nodeau-system, key
``organisation.json`` (the document as installed), for the controller and the CLI to read.

Why it is so: docs/adr/decisions/adapters-kube.md (organisation.py).
"""

from __future__ import annotations

from typing import Any

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict
from nodeau.adapters.kube.config_maps import read_config_map, write_config_map
from nodeau.adapters.organisation_document import parse_organisation
from nodeau.domain.organisation import Organisation
from nodeau.ports.cluster import ClusterError

WHERE = f"ConfigMap {r.NAMESPACE}/{r.ORGANISATION_CONFIGMAP} key {r.ORGANISATION_KEY}"
_ATTEMPTS = 8


class KubeOrganisationPolicy:
    """``OrganisationPolicy`` on ConfigMap ``nodeau-organisation``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    @property
    def where(self) -> str:
        return WHERE

    def read(self) -> Organisation:
        found = read_config_map(self._api, r.ORGANISATION_CONFIGMAP, "read the organisation")
        text = None if found is None else found[0].get(r.ORGANISATION_KEY)
        if text is None:
            return Organisation.none()
        return parse_organisation(text.encode("utf-8"), WHERE)

    def install(self, document: bytes) -> Organisation:
        policy = parse_organisation(document, "the policy given")
        self._replace({r.ORGANISATION_KEY: document.decode("utf-8")})
        return policy

    def remove(self) -> bool:
        found = read_config_map(self._api, r.ORGANISATION_CONFIGMAP, "read the organisation")
        if found is None or r.ORGANISATION_KEY not in found[0]:
            return False
        self._replace({})
        return True

    def _replace(self, data: dict[str, str]) -> None:
        for _ in range(_ATTEMPTS):
            found = read_config_map(self._api, r.ORGANISATION_CONFIGMAP, "read the organisation")
            version = None if found is None else found[1]
            try:
                write_config_map(
                    self._api, r.ORGANISATION_CONFIGMAP, data, version, "write the organisation"
                )
            except Conflict:
                continue
            return
        raise ClusterError(f"cannot write {WHERE}: it changed under {_ATTEMPTS} writes in a row")
