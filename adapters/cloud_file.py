"""``CloudState`` in files under NODEAU_HOME/cloud/: the association and the records.

Why it is so: docs/adr/decisions/adapters.md (cloud_file.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import cattrs
from cattrs.errors import BaseValidationError

from nodeau.adapters.private_files import replace_whole
from nodeau.domain.cloud import Association, OperationKind, OperationRecord, OutboundCall
from nodeau.ports.cloud import CloudStateError

FOLDER = "cloud"
ASSOCIATION = "association.json"
CALLS = "calls.jsonl"
OPERATIONS = "operations.jsonl"

_T = TypeVar("_T")


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_unstructure_hook(datetime, datetime.isoformat)

    def moment(value: object, _type: object) -> datetime:
        if not isinstance(value, str):
            raise ValueError(f"a moment is ISO 8601 text, got {value!r}")
        return datetime.fromisoformat(value)

    converter.register_structure_hook(datetime, moment)
    converter.register_unstructure_hook_func(
        lambda t: t == frozenset[OperationKind], lambda kinds: sorted(k.value for k in kinds)
    )
    return converter


_CONVERTER = _converter()


def _line(value: object) -> bytes:
    return (json.dumps(_CONVERTER.unstructure(value), sort_keys=True) + "\n").encode("utf-8")


class FileCloudState:
    """``CloudState`` in ``home/cloud``."""

    def __init__(self, home: Path) -> None:
        self._folder = home / FOLDER

    @property
    def where(self) -> str:
        return str(self._folder)

    @property
    def folder(self) -> Path:
        return self._folder

    def association(self) -> Association | None:
        path = self._folder / ASSOCIATION
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CloudStateError(f"{path} cannot be read ({exc.strerror or exc})") from exc
        return self._structure(data, Association, str(path))

    def keep(self, association: Association) -> None:
        path = self._folder / ASSOCIATION
        try:
            replace_whole(path, _line(association))
        except OSError as exc:
            raise CloudStateError(f"{path} cannot be written ({exc.strerror or exc})") from exc

    def forget(self) -> bool:
        path = self._folder / ASSOCIATION
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise CloudStateError(f"{path} cannot be removed ({exc.strerror or exc})") from exc
        return True

    def record_call(self, call: OutboundCall) -> None:
        self._append(CALLS, call)

    def calls(self) -> tuple[OutboundCall, ...]:
        return self._records(CALLS, OutboundCall)

    def record_operation(self, record: OperationRecord) -> None:
        self._append(OPERATIONS, record)

    def operations(self) -> tuple[OperationRecord, ...]:
        return self._records(OPERATIONS, OperationRecord)

    # -- files -------------------------------------------------------------------------

    def _append(self, name: str, value: object) -> None:
        path = self._folder / name
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            with path.open("ab") as out:  # one write of one line: appends do not interleave
                out.write(_line(value))
                out.flush()
        except OSError as exc:
            raise CloudStateError(f"{path} cannot be written ({exc.strerror or exc})") from exc

    def _records(self, name: str, kind: type[_T]) -> tuple[_T, ...]:
        path = self._folder / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise CloudStateError(f"{path} cannot be read ({exc.strerror or exc})") from exc
        lines = data.split(b"\n")
        complete = lines[:-1]  # the part after the last newline is empty, or cut short
        return tuple(
            self._structure(line, kind, f"{path} line {n}")
            for n, line in enumerate(complete, start=1)
        )

    @staticmethod
    def _structure(data: bytes, kind: type[_T], where: str) -> _T:
        try:
            raw: Any = json.loads(data)
            return _CONVERTER.structure(raw, kind)
        except (ValueError, BaseValidationError, TypeError) as exc:
            raise CloudStateError(f"{where} does not read: {exc}") from exc
