"""Which model server a request goes to: a workload's endpoint serves its one model; the
gateway serves every model running here, chosen by the request's ``model``.

Why it is so: docs/adr/decisions/apps-endpoint.md (choice.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from attrs import field, frozen
from starlette.responses import Response

from nodeau.apps.endpoint.answers import (
    Unavailable,
    Upstream,
    error,
    model_not_found,
    not_running,
    one_line,
    unavailable,
)
from nodeau.domain.resolution import Candidate, chosen_workloads

log = logging.getLogger("nodeau.endpoint")

Lookup = Callable[[], Upstream | Unavailable | None]


class OneModel:
    """A workload's endpoint: ``upstream()`` says where its model server is now."""

    def __init__(self, upstream: Lookup) -> None:
        self._upstream = upstream

    def find(self) -> Upstream | Unavailable | Response | None:
        """What ``upstream()`` says now, or the error response of a lookup that failed."""
        try:
            return self._upstream()
        except Exception as exc:
            log.warning("cannot look up the model server: %s", one_line(exc))
            return error(
                503, f"cannot find this endpoint's model server: {one_line(exc)}", "unavailable"
            )

    def early(self) -> Upstream | Response | None:
        """The upstream now, or the error response that says why there is none."""
        found = self.find()
        if found is None:
            return not_running()
        if isinstance(found, Unavailable):
            return unavailable(found)
        return found

    def chosen(self, early: Upstream | None, model: object) -> Upstream | Response:
        assert early is not None, "an endpoint knows its upstream before the body"
        if model is None or (isinstance(model, str) and early.serves(model)):
            return early
        return model_not_found(model, early)

    def listed(self) -> list[Upstream] | Response:
        found = self.early()
        return found if isinstance(found, Response) else [found] if found is not None else []

    def named(self, model: str) -> Upstream | Response:
        found = self.early()
        if not isinstance(found, Upstream):
            return found if found is not None else not_running()
        return found if found.serves(model) else model_not_found(model, found)

    def health(self) -> dict[str, object]:
        found = self.find()
        up = found if isinstance(found, Upstream) else None
        if up is not None:
            server = "running"
        elif isinstance(found, Unavailable):
            server = found.model_server
        else:
            server = "not running"
        return {
            "status": "ok",
            "model": up.model_name if up is not None else None,
            "task": up.task.value if up is not None else None,
            "model_server": server,
        }


@frozen(kw_only=True)
class Served:
    """Every workload the gateway may route to now: those whose model server answers, and
    those restarting (by name: why not now, and when to come back)."""

    running: tuple[Upstream, ...] = ()
    waiting: Mapping[str, Unavailable] = field(factory=dict)


class EveryModel:
    """The gateway: ``served()`` says which workloads serve here now."""

    def __init__(self, served: Callable[[], Served]) -> None:
        self._served = served

    def find(self) -> Served | Response:
        try:
            return self._served()
        except Exception as exc:
            log.warning("cannot look up the served models: %s", one_line(exc))
            return error(503, f"cannot find the models served here: {one_line(exc)}", "unavailable")

    def early(self) -> Upstream | Response | None:
        return None  # the body's model decides

    def chosen(self, early: Upstream | None, model: object) -> Upstream | Response:
        served = self.find()
        if isinstance(served, Response):
            return served
        if not isinstance(model, str):
            return no_model_named(model, served)
        return self._pick(served, model)

    def _pick(self, served: Served, model: str) -> Upstream | Response:
        candidates = [
            Candidate(workload=u.model_name, names=u.names, artifact_id=u.artifact_id)
            for u in served.running
        ] + [Candidate(workload=name) for name in served.waiting]
        chosen = chosen_workloads(model, candidates)
        if len(chosen) > 1:
            return error(
                400,
                f"{model!r} names the model of {len(chosen)} workloads here "
                f"({', '.join(sorted(chosen))}); name one of them as model",
                "invalid_request_error",
                code="model_ambiguous",
                param="model",
            )
        if not chosen:
            return gateway_model_not_found(model, served)
        (name,) = chosen
        if name in served.waiting:
            return unavailable(served.waiting[name])
        return next(u for u in served.running if u.model_name == name)

    def listed(self) -> list[Upstream] | Response:
        served = self.find()
        return served if isinstance(served, Response) else list(served.running)

    def named(self, model: str) -> Upstream | Response:
        served = self.find()
        return served if isinstance(served, Response) else self._pick(served, model)

    def health(self) -> dict[str, object]:
        served = self.find()
        if isinstance(served, Response):
            return {"status": "ok", "models": None, "waiting": None}
        return {
            "status": "ok",
            "models": sorted(u.model_name for u in served.running),
            "waiting": sorted(served.waiting),
        }


def _serving(served: Served) -> str:
    names = sorted([u.model_name for u in served.running] + list(served.waiting))
    return f"it serves {', '.join(repr(n) for n in names)}" if names else "it serves none now"


def no_model_named(model: object, served: Served) -> Response:
    """The 400 of a gateway request that names no model (or names it with something that is
    not text): the gateway serves several, and guesses none."""
    return error(
        400,
        "the gateway serves every model running here: name one as model "
        f"({_serving(served)}; GET /v1/models lists them)",
        "invalid_request_error",
        param="model",
    )


def gateway_model_not_found(model: str, served: Served) -> Response:
    """The 404 of a gateway request for a model no workload here serves."""
    return error(
        404,
        f"the model {model!r} is not served here ({_serving(served)}); "
        f"nodeau run {model} serves it",
        "invalid_request_error",
        code="model_not_found",
        param="model",
    )
