"""Reaching the user's cluster: the kubeconfig as kubectl finds it, else the Pod's ServiceAccount.

Why it is so: docs/adr/decisions/adapters-kube.md (client.py).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from attrs import frozen
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.config.kube_config import list_kube_config_contexts

from nodeau.ports.cluster import (
    ClusterRefused,
    ClusterUnreachable,
    Conflict,
    Forbidden,
    NoAnswer,
    NotFound,
    Unauthorized,
)

__all__ = [
    "ClusterUnreachable",
    "Conflict",
    "Connection",
    "NotFound",
    "api_errors",
    "connect",
    "or_none",
]

T = TypeVar("T")

# where a Pod finds its ServiceAccount (module constants so a test can point elsewhere)
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
SERVICE_ACCOUNT_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read (seconds): a cluster that hangs is an error
CREDENTIALS_EVERY_S = 1.0  # how often the client's credentials are set again, at most


@frozen(kw_only=True)
class Connection:
    """A configured client and what it points at."""

    api: Any  # kubernetes.client.ApiClient
    server: str
    context: str | None  # the kubeconfig context used; None in-cluster


def connect(
    kubeconfig: Path | None = None,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Connection:
    """A client for the cluster kubectl would talk to; ClusterUnreachable when there is none.

    Without ``kubeconfig``: ``KUBECONFIG`` in ``environ`` (the caller's settings; none
    given, none read), else ~/.kube/config, else the in-cluster service account."""
    if kubeconfig is not None:
        return _from_kubeconfig(str(kubeconfig), context)
    if environ is not None and environ.get("KUBECONFIG"):
        return _from_kubeconfig(environ["KUBECONFIG"], context)
    home = Path("~/.kube/config").expanduser()
    if home.is_file():
        return _from_kubeconfig(str(home), context)
    if context is not None:
        raise ClusterUnreachable(f"no kubeconfig ({home} does not exist) has context {context}")
    return _in_cluster(home)


def steady_credentials(api: Any, every_s: float = CREDENTIALS_EVERY_S) -> Any:
    """``api`` with its credentials' refresh run at most once every ``every_s`` seconds.

    The client's own hook (kubeconfig and in-cluster alike) runs before every request and
    sets the whole configuration again, its host too, whose setter reads the proxy from
    the environment: about 0.6 ms of each request here. A token is re-read when it
    expires (the hook's own test), which a second does not change. The hook puts a new
    hook of its own in place each time it runs; this one is put back after it."""
    configuration = api.configuration
    if configuration.refresh_api_key_hook is None:
        return api
    hook = [configuration.refresh_api_key_hook]
    last = [-math.inf]
    lock = threading.Lock()

    def steady(config: Any) -> None:
        with lock:
            now = time.monotonic()
            if now - last[0] < every_s:
                return
            last[0] = now
            hook[0](config)
            if config.refresh_api_key_hook is not steady:
                hook[0] = config.refresh_api_key_hook or hook[0]
                config.refresh_api_key_hook = steady

    configuration.refresh_api_key_hook = steady
    return api


def _from_kubeconfig(files: str, context: str | None) -> Connection:
    missing = [f for f in files.split(os.pathsep) if f and not Path(f).expanduser().is_file()]
    if missing:
        raise ClusterUnreachable(f"{missing[0]}: no such kubeconfig file")
    try:
        contexts, active = list_kube_config_contexts(config_file=files)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise ClusterUnreachable(f"{files}: {_one_line(exc)}") from exc
    except Exception as exc:  # not YAML: the loader raises whatever its parser raised
        raise ClusterUnreachable(f"{files}: not a readable kubeconfig ({_one_line(exc)})") from exc
    known = sorted(c["name"] for c in contexts or ())
    chosen = context if context is not None else (active or {}).get("name")
    if chosen is None:
        raise ClusterUnreachable(f"{files}: no current context; name one of {', '.join(known)}")
    if chosen not in known:
        raise ClusterUnreachable(
            f"{files}: no context called {chosen} (known: {', '.join(known) or 'none'})"
        )
    try:
        api = config.new_client_from_config(config_file=files, context=chosen)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise ClusterUnreachable(f"{files}: context {chosen}: {_one_line(exc)}") from exc
    return Connection(api=steady_credentials(api), server=api.configuration.host, context=chosen)


def _in_cluster(home: Path) -> Connection:
    configuration = client.Configuration()
    try:
        loader: Any = InClusterConfigLoader  # untyped
        loader(
            token_filename=str(SERVICE_ACCOUNT_TOKEN), cert_filename=str(SERVICE_ACCOUNT_CA)
        ).load_and_set(configuration)
    except ConfigException as exc:
        raise ClusterUnreachable(
            f"no kubeconfig ($KUBECONFIG is not set and {home} does not exist) and not "
            f"running in a cluster ({_one_line(exc)})"
        ) from exc
    api = steady_credentials(client.ApiClient(configuration=configuration))
    return Connection(api=api, server=configuration.host, context=None)


REFUSALS: dict[int, type[ClusterRefused]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


@contextmanager
def api_errors(what: str) -> Iterator[None]:
    """The failures of the requests inside, as the port's errors (``what``: what was tried)."""
    try:
        yield
    except ApiException as exc:
        status = int(exc.status or 0)
        raise REFUSALS.get(status, ClusterRefused)(what, status, api_message(exc)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        cause = getattr(exc, "reason", None) or exc
        raise NoAnswer(what, _one_line(exc), _one_line(cause)) from exc


def or_none(what: str, call: Callable[[], T]) -> T | None:
    """``call()``, or None when the API server answers 404: the thing is not there."""
    try:
        with api_errors(what):
            return call()
    except NotFound:
        return None


def api_message(exc: ApiException) -> str:
    """What the API server said, in one line (its Status message when it sent one)."""
    try:
        message = json.loads(exc.body or "")["message"]
    except (ValueError, KeyError, TypeError):
        message = exc.reason or "no reason given"
    return " ".join(str(message).split())


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def send_json(
    api: Any, method: str, path: str, params: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    """Send ``body`` exactly as written and return the answer as plain JSON.

    The client's typed API methods turn a dict body into their own model first and
    write it back out, which reformats MicroTime fields (``eventTime``, a Lease's
    ``renewTime``) without their fraction when it is zero, and the API server refuses
    that. Raises ApiException for any answer that is not 2xx, as the typed methods do.
    """
    method, url, headers, payload, _ = api.param_serialize(
        method=method,
        resource_path=path,
        path_params=params,
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers, payload, _request_timeout=REQUEST_TIMEOUT)
    response.read()
    if not 200 <= response.status < 300:
        raise ApiException(status=response.status, reason=response.reason, body=response.data)
    answer: dict[str, Any] = json.loads(response.data)
    return answer
