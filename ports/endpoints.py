"""Ports of the loopback endpoints: each workload's OpenAI-compatible address on 127.0.0.1,
run as a user service on this machine, for a workload here or on a fleet."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from nodeau.ports.errors import NodeauError

# each endpoint's own /metrics text, in the order asked; None where it did not answer
MetricsTexts = Callable[[Sequence[str]], Sequence[str | None]]


class LoopbackEndpoints(Protocol):
    """This machine's workloads' loopback endpoints."""

    def free_port(self) -> int:
        """A port on 127.0.0.1 nothing listens on now."""
        ...

    def start(self, name: str, port: int, allowed_origins: tuple[str, ...] = ()) -> str:
        """Start ``name``'s endpoint on ``port`` (also answering pages from
        ``allowed_origins``) and wait until it listens; how it runs, for a person."""
        ...

    def allowed_origins(self, name: str) -> tuple[str, ...] | None:
        """The web origins ``name``'s endpoint was last started with (None: none kept)."""
        ...

    def stop(self, name: str) -> None: ...


class FleetLoopbackEndpoints(Protocol):
    """This machine's loopback endpoints of fleet workloads, each routing to wherever its
    workload serves now."""

    def port(self, name: str) -> int | None:
        """The loopback port this machine gave ``name``, if any."""
        ...

    def start(self, name: str, allowed_origins: tuple[str, ...] = ()) -> tuple[int, str]:
        """Start ``name``'s endpoint (its port kept, else a free one); the port, and how it
        runs."""
        ...

    def stop(self, name: str, *, forget: bool = False) -> None:
        """Stop ``name``'s endpoint; ``forget``: uninstall it and free its port."""
        ...

    def origins(self, name: str) -> tuple[str, ...]:
        """The web origins ``name``'s endpoint was last started with (() if none)."""
        ...

    def running_origins(self, name: str) -> tuple[str, ...] | None:
        """The web origins ``name``'s endpoint answers while it listens; None if it does not."""
        ...


class NotAnswered(NodeauError):
    """An endpoint did not answer a request (refused, reset, timed out); one line."""


class EndpointAnswer(Protocol):
    """An endpoint's answer, its body not yet read; read it whole or as it comes, once."""

    @property
    def status(self) -> int: ...

    async def whole(self) -> bytes:
        """The whole body; the answer is closed after."""
        ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it comes, undecoded; the answer is closed at its end."""
        ...

    async def close(self) -> None: ...


class EndpointClient(Protocol):
    """One HTTP client to this machine's loopback endpoints, open while a server runs."""

    def opened(self) -> AbstractAsyncContextManager[None]:
        """The client, open within the block (a server's lifespan)."""
        ...

    async def post(self, url: str, body: object) -> EndpointAnswer:
        """POST ``body`` as JSON to ``url``; its answer as soon as its head arrives;
        ``NotAnswered`` when no answer came."""
        ...
