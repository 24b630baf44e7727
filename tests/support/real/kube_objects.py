"""A fleet's workload objects as the controller leaves them, and commands run against it.

``the_object`` reads a GPUService or BatchJob as the API server has it;
``decide_as_the_controller`` writes the admitted status the controller writes;
``started`` and ``finished`` run a CLI command in the background and read its JSON.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from typing import Any

from attrs import evolve
from kubernetes import client
from returns.result import Success

from nodeau.adapters.kube import resources as r
from nodeau.adapters.record_json import pack, to_plain
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import Admission, Snapshot, WorkloadRecord
from tests.support.builders.admissions import decider, fleet_of
from tests.support.real.cli import Cli

NOW = datetime.now(UTC).replace(microsecond=123456)
PLURAL = {WorkloadKind.SERVICE: r.GPUSERVICES, WorkloadKind.BATCH: r.BATCHJOBS}


def the_object(api: client.ApiClient, kind: WorkloadKind, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(  # type: ignore[assignment]
            r.GROUP, r.VERSION, r.NAMESPACE, PLURAL[kind], name
        )
    except client.ApiException as exc:
        assert exc.status == 404
        return None
    return found


def decide_as_the_controller(api: client.ApiClient, kind: WorkloadKind, name: str) -> None:
    """Write the admitted status the controller writes (status subresource, replaced whole)."""
    outcome = decider(name, fleet_of(2), NOW)(Snapshot(ledger=Ledger(), workloads=()))
    assert isinstance(outcome, Success)
    admission: Admission = outcome.unwrap()
    if kind is WorkloadKind.BATCH:
        workload = evolve(admission.record.workload, kind=WorkloadKind.BATCH)
        admission = evolve(admission, record=evolve(admission.record, workload=workload))
    record = admission.record
    status = {
        "state": "admitted",
        "sentence": "admitted",
        "machine": record.workload.machine,
        "gpuUUID": record.workload.gpu_uuid,
        "reservedBytes": admission.placement.reservation.bytes,
        "source": "estimated",
        "decidedBy": "test",
        "record": to_plain(record, WorkloadRecord),
        "admission": pack(admission, Admission),
        "reservation": to_plain(admission.placement.reservation, Reservation),
        "conditions": [
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "fits",
                "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ],
    }
    if kind is WorkloadKind.SERVICE:
        status["endpoint"] = "http://10.1.2.3:8080/v1"
    custom = client.CustomObjectsApi(api)
    body: Any = custom.get_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, PLURAL[kind], name
    )
    body["status"] = status
    custom.replace_namespaced_custom_object_status(
        r.GROUP, r.VERSION, r.NAMESPACE, PLURAL[kind], name, body
    )


def started(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return cli.start(*args)


def finished(running: subprocess.Popen[str]) -> Any:
    out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    return json.loads(out)
