"""A workload's object as the state store writes it: the admission recorded in its status
(refused when another is there already), the move of a recovery, and the Events beside.

Why it is so: docs/adr/decisions/adapters-kube.md (state_store.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from nodeau.adapters.kube import events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.guards import AdmissionInFlight, holds_other_card
from nodeau.adapters.kube.informer_cache import KnownObjects
from nodeau.adapters.kube.objects import (
    KubeObject,
    admitted_status,
    create_object,
    find_object,
    record_of,
    write_status,
)
from nodeau.domain.recording import admitted_event, admitted_text, moved_text
from nodeau.ports.state import Admission, UnknownWorkload, WorkloadRecord


def record_in(found: KubeObject) -> WorkloadRecord:
    if "record" not in found.status:
        raise UnknownWorkload(f"no workload called {found.name} in {r.NAMESPACE}")
    return record_of(found)


class StatusRecords:
    """What the state store writes on a workload's object, and reads back from it."""

    def __init__(
        self,
        api: Any,
        *,
        identity: str,
        objects: KnownObjects | None,
        sending: events.Sending | None,
    ) -> None:
        self._api = api
        self._identity = identity
        self._objects = objects
        self._sending = sending

    def record_admission(
        self, admission: Admission, known: KubeObject | None, now: datetime
    ) -> None:
        record = admission.record
        target = known or create_object(self._api, record, self._objects)

        def apply(current: KubeObject) -> dict[str, Any]:
            if holds_other_card(current, admission):
                raise AdmissionInFlight(
                    f"{current.title} already records another admission; it is not overwritten"
                )
            text = admitted_text(admission)
            return admitted_status(current, admission, now, self._identity, text)

        written = write_status(
            self._api,
            record.workload.kind,
            record.workload.name,
            apply,
            first=target,
            known=self._objects,
        )
        self.event(record.workload.name, written, "Admitted", admitted_event(admission), now)

    def record_move(
        self, admission: Admission, before: WorkloadRecord, found: KubeObject, now: datetime
    ) -> None:
        record = admission.record

        def apply(current: KubeObject) -> dict[str, Any]:
            if record_in(current).workload != before.workload:
                raise AdmissionInFlight(
                    f"{current.title} changed while it was being moved; it is not overwritten"
                )
            return admitted_status(current, admission, now, self._identity, moved_text(admission))

        written = write_status(
            self._api, found.kind, record.workload.name, apply, first=found, known=self._objects
        )
        self.event(record.workload.name, written, "Recovered", moved_text(admission), now)

    def holder(self, name: str) -> KubeObject:
        found = find_object(self._api, name, self._objects)
        if found is None or "record" not in found.status:
            raise UnknownWorkload(f"no workload called {name} in {r.NAMESPACE}")
        return found

    def event(
        self,
        name: str,
        involved: KubeObject | None,
        reason: str,
        message: str,
        at: datetime,
        *,
        warning: bool = False,
    ) -> None:
        events.record(
            self._api,
            workload=name,
            involved=involved,
            reason=reason,
            message=message,
            at=at,
            identity=self._identity,
            warning=warning,
            sending=self._sending,
        )
