"""One machine's entitlement store: three small files under NODEAU_HOME.

Why it is so: docs/adr/decisions/adapters.md (entitlement_file.py).
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime
from pathlib import Path

from nodeau.adapters.private_files import replace_whole, written_beside
from nodeau.domain.entitlements import newest_seen
from nodeau.ports.entitlements import (
    EntitlementStoreError,
    StoredEntitlement,
    installation_id_problem,
)

ID_FILE = "installation-id"
DOCUMENT_FILE = "entitlement.json"
ANCHOR_FILE = "clock-anchor"


class FileEntitlementStore:
    """``EntitlementStore`` in the folder ``home``."""

    def __init__(self, home: Path) -> None:
        self._home = home

    @property
    def document_path(self) -> Path:
        return self._home / DOCUMENT_FILE

    def read(self) -> StoredEntitlement:
        try:
            document = self.document_path.read_bytes()
        except FileNotFoundError:
            document = None
        except OSError as exc:
            raise EntitlementStoreError(f"{self.document_path} cannot be read ({exc})") from exc
        return StoredEntitlement(
            installation_id=self._installation_id(),
            document=document,
            anchor=self._anchor(),
            where=str(self.document_path),
        )

    def install(self, document: bytes, seen: datetime) -> None:
        self._installation_id()
        try:
            replace_whole(self.document_path, document)
        except OSError as exc:
            raise EntitlementStoreError(f"{self.document_path} cannot be written ({exc})") from exc
        self.advance_anchor(seen)

    def remove(self, seen: datetime) -> bool:
        try:
            self.document_path.unlink()
            removed = True
        except FileNotFoundError:
            removed = False
        except OSError as exc:
            raise EntitlementStoreError(f"{self.document_path} cannot be removed ({exc})") from exc
        self.advance_anchor(seen)
        return removed

    def advance_anchor(self, seen: datetime) -> None:
        kept = self._anchor()
        newest = newest_seen(kept, seen)
        if newest == kept:
            return
        path = self._home / ANCHOR_FILE
        try:
            replace_whole(path, newest.isoformat().encode("ascii"))
        except OSError as exc:
            raise EntitlementStoreError(f"{path} cannot be written ({exc})") from exc

    def _anchor(self) -> datetime | None:
        path = self._home / ANCHOR_FILE
        try:
            text = path.read_text(encoding="ascii").strip()
            moment = datetime.fromisoformat(text)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise EntitlementStoreError(
                f"{path} is not an ISO 8601 moment ({exc}); fix or delete it"
            ) from exc
        if moment.utcoffset() is None:
            raise EntitlementStoreError(f"{path} has no UTC offset; fix or delete it")
        return moment

    def _installation_id(self) -> str:
        path = self._home / ID_FILE
        try:
            if not path.exists():
                tmp = written_beside(path, (secrets.token_hex(16) + "\n").encode("ascii"))
                try:
                    os.link(tmp, path)  # refuses to replace: the first id made stays
                except FileExistsError:
                    pass
                finally:
                    tmp.unlink()
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise EntitlementStoreError(f"{path} cannot be read or made ({exc})") from exc
        problem = installation_id_problem(text)
        if problem is not None:
            raise EntitlementStoreError(f"{path} {problem}; fix or delete it")
        return text
