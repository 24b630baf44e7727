"""What ``nodeau run`` does with a name: admit a new workload, or bring an endpoint back.

Decisions recorded here:

* A workload's name follows Kubernetes' rule for object names on every plane
  (lower-case letters, digits, ``-`` and ``.``, starting and ending with a letter
  or digit, at most 253 characters), so a name that works on one machine works
  on the fleet. Without ``--name`` it is made from the model's name.
* Running a name that already serves the same artifact only brings its endpoint
  back: the model is still loaded, so starting again is instant. A restarting
  one too: its endpoint is what starts its model server again.
* A name held by a workload of another artifact, of another kind, or one still
  starting is taken: the person chooses another name or stops that one.
* A name whose workload finished is free again.
"""

from __future__ import annotations

import re

from attrs import frozen

from nodeau.domain.workloads import Workload, WorkloadKind, WorkloadState, holds_gpu

NAME_SHAPE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a workload, or None."""
    if NAME_SHAPE.match(name) is None:
        return (
            f"{name!r}: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit (at most 253 characters)"
        )
    return None


def name_from_model(model: str) -> str | None:
    """A valid workload name made from a model's name; None when nothing is left of it."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", model.lower()).strip("-.")[:253].strip("-.")
    return cleaned if cleaned and name_problem(cleaned) is None else None


@frozen(kw_only=True)
class Admit:
    """No workload holds the name: admit a new one."""


@frozen(kw_only=True)
class EndpointBack:
    """It already serves this artifact: bring its endpoint back, admit nothing."""

    workload: Workload


@frozen(kw_only=True)
class NameTaken:
    """Another workload holds the name."""

    sentence: str


def run_step(existing: Workload | None, *, artifact_id: str) -> Admit | EndpointBack | NameTaken:
    """What running a service under an existing name does."""
    if existing is None or not holds_gpu(existing.state):
        return Admit()
    name = existing.name
    if existing.kind is not WorkloadKind.SERVICE:
        return NameTaken(
            sentence=f"{name} is a batch job holding a card; give another --name "
            f"or stop it with nodeau batch stop {name}"
        )
    if existing.artifact_id != artifact_id:
        return NameTaken(
            sentence=f"{name} already serves {existing.model} ({existing.artifact_id[:12]}); "
            f"give another --name or stop it with nodeau stop {name} --workload"
        )
    if existing.state in (WorkloadState.SERVING, WorkloadState.RESTARTING):
        # loaded, or being started again by its endpoint: bring the endpoint back
        return EndpointBack(workload=existing)
    return NameTaken(
        sentence=f"{name} is {existing.state.value}, not serving yet; nodeau ps shows when "
        f"it serves, or stop it with nodeau stop {name} --workload"
    )
