"""The dashboard's client of the workloads' loopback endpoints (the Playground's calls):
httpx, one pool for the server's life, never through the environment's proxy, with a
long read timeout since an answer streams as the model writes it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from attrs import define

from nodeau.ports.endpoints import NotAnswered

TIMEOUTS = httpx.Timeout(connect=5.0, read=300.0, write=60.0, pool=60.0)


@define
class HttpxAnswer:
    """``ports.endpoints.EndpointAnswer`` over an httpx response opened as a stream."""

    _response: httpx.Response

    @property
    def status(self) -> int:
        return self._response.status_code

    async def whole(self) -> bytes:
        try:
            return await self._response.aread()
        finally:
            await self._response.aclose()

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        finally:
            await self._response.aclose()

    async def close(self) -> None:
        await self._response.aclose()


class HttpxEndpointClient:
    """``ports.endpoints.EndpointClient``; ``transport``: httpx's own unless a test gives one."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        async with httpx.AsyncClient(
            timeout=TIMEOUTS, transport=self._transport, trust_env=False
        ) as client:
            self._client = client
            try:
                yield
            finally:
                self._client = None

    async def post(self, url: str, body: object) -> HttpxAnswer:
        assert self._client is not None, "post is called while the client is open"
        try:
            response = await self._client.send(
                self._client.build_request("POST", url, json=body), stream=True
            )
        except httpx.HTTPError as exc:
            raise NotAnswered(" ".join(str(exc).split()) or type(exc).__name__) from exc
        return HttpxAnswer(response)
