"""One machine's organisation policy: ``organisation.json`` under NODEAU_HOME.

Why it is so: docs/adr/decisions/adapters.md (organisation_file.py).
"""

from __future__ import annotations

from pathlib import Path

from nodeau.adapters.organisation_document import parse_organisation
from nodeau.adapters.private_files import replace_whole
from nodeau.domain.organisation import Organisation
from nodeau.ports.organisation import OrganisationError

POLICY_FILE = "organisation.json"


class FileOrganisationPolicy:
    """``OrganisationPolicy`` in a file under ``home``."""

    def __init__(self, home: Path) -> None:
        self._path = home / POLICY_FILE

    @property
    def where(self) -> str:
        return str(self._path)

    def read(self) -> Organisation:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return Organisation.none()
        except OSError as exc:
            raise OrganisationError(f"{self._path}: cannot read it ({exc.strerror})") from exc
        return parse_organisation(data, self.where)

    def install(self, document: bytes) -> Organisation:
        found = parse_organisation(document, "the policy given")
        try:
            replace_whole(self._path, document)
        except OSError as exc:
            raise OrganisationError(f"{self._path}: cannot write it ({exc.strerror})") from exc
        return found

    def remove(self) -> bool:
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise OrganisationError(f"{self._path}: cannot remove it ({exc.strerror})") from exc
        return True
