"""Connections to upstream MCP servers, kept open by the serving process and shared by every
gateway session to the same upstream.

A stdio upstream is started as a child process of the web process (its command, in the project
directory, with only the environment variables the ``mcp`` SDK deems safe to inherit plus
``PYTHONPATH``: the web process's secrets never reach it). When it exits or its connection
breaks, the calls in flight fail with ``UpstreamLost`` (their outcome is unknown: the upstream
may have acted) and the next call starts it again. A call that could not reach an upstream at
all fails with ``UpstreamUnavailable`` (nothing was sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
from django.conf import settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    RequestParamsMeta,
    TextContent,
)

logger = logging.getLogger(__name__)

# Errors the SDK raises for a call whose answer never came (the connection closed, or the
# request timed out): the upstream may have acted.
_LOST = (CONNECTION_CLOSED, REQUEST_TIMEOUT)
# Seconds to wait for an upstream to start and answer its handshake.
CONNECT_TIMEOUT = 30.0


class UpstreamUnavailable(Exception):
    """The upstream could not be reached: nothing was sent to it."""


class UpstreamLost(Exception):
    """The connection to the upstream broke while a call was in flight: whether the upstream
    acted on it is unknown."""


@dataclass(frozen=True)
class UpstreamSpec:
    """What it takes to reach one upstream (plain values, read from ``gateway.models.Upstream``
    outside the event loop): ``transport`` stdio (``argv``) or http (``url``, ``headers``)."""

    name: str
    transport: str
    argv: tuple[str, ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, upstream: Any) -> UpstreamSpec:
        """The spec of a ``gateway.models.Upstream``."""
        return cls(
            name=upstream.name,
            transport=upstream.transport,
            argv=tuple(upstream.argv),
            url=upstream.url,
            headers=tuple(sorted((str(k), str(v)) for k, v in upstream.headers.items())),
        )


def _target(spec: UpstreamSpec) -> Any:
    if spec.transport == "stdio":
        env = get_default_environment()
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return StdioServerParameters(
            command=spec.argv[0], args=list(spec.argv[1:]), env=env, cwd=settings.BASE_DIR
        )
    http = httpx2.AsyncClient(headers=dict(spec.headers), timeout=httpx2.Timeout(30, read=None))
    return streamable_http_client(spec.url, http_client=http)


def client_for(spec: UpstreamSpec) -> Client:
    """A new (not yet entered) MCP client of the upstream, speaking the handshake protocol."""
    return Client(_target(spec), mode="legacy", raise_exceptions=True)


async def fetch_tools(spec: UpstreamSpec) -> list[dict[str, Any]]:
    """The upstream's tools (``tools/list``, every page) as MCP JSON, over a connection of its
    own.

    Raises:
        UpstreamUnavailable: it could not be started or reached.
    """
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT), client_for(spec) as client:
            tools, cursor = [], None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                tools += [
                    tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for tool in page.tools
                ]
                cursor = page.next_cursor
                if not cursor:
                    return tools
    except Exception as exc:
        raise UpstreamUnavailable(f"{spec.name}: {exc}") from exc


@dataclass
class _Connection:
    """One open client session to an upstream, owned by the task ``task`` (an ``mcp`` client
    must be entered and left in one task)."""

    spec: UpstreamSpec
    client: Client | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    error: BaseException | None = None
    task: asyncio.Task[None] | None = None

    async def own(self) -> None:
        try:
            async with client_for(self.spec) as client:
                self.client = client
                self.ready.set()
                await self.done.wait()
        except BaseException as exc:  # recorded; the next call reconnects
            self.error = exc
            logger.warning("upstream %s: connection ended: %r", self.spec.name, exc)
        finally:
            self.client = None
            self.done.set()
            self.ready.set()

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.done.is_set()


class UpstreamPool:
    """The open connections of this process, one per upstream (reopened when its spec
    changes or it died)."""

    def __init__(self) -> None:
        self._connections: dict[str, _Connection] = {}
        self._lock: asyncio.Lock | None = None

    async def _connection(self, spec: UpstreamSpec) -> _Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            current = self._connections.get(spec.name)
            if current is not None and current.alive and current.spec == spec:
                return current
            if current is not None:
                current.done.set()
            connection = _Connection(spec)
            connection.task = asyncio.get_running_loop().create_task(connection.own())
            self._connections[spec.name] = connection
            try:
                await asyncio.wait_for(connection.ready.wait(), CONNECT_TIMEOUT)
            except TimeoutError:
                connection.done.set()
                raise UpstreamUnavailable(
                    f"{spec.name}: no answer in {CONNECT_TIMEOUT} s"
                ) from None
            if not connection.alive:
                raise UpstreamUnavailable(f"{spec.name}: {connection.error!r}")
            return connection

    async def call_tool(
        self,
        spec: UpstreamSpec,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        *,
        unchecked: bool = False,
    ) -> CallToolResult:
        """Call ``name`` with ``arguments`` (and ``meta`` as the request's ``_meta``) on the
        upstream, returning its result (an ``isError`` result included). ``unchecked``: the
        caller checks the result against the tool's ``outputSchema`` itself
        (``gateway.calls.output_failure``), so the request is sent as it is
        (``ClientSession.send_request``) and a result that fails the schema comes back to be
        recorded: the SDK's ``call_tool`` raises on it instead, and its answer is lost
        (``ClientSession.validate_tool_result``, mcp 2.3).

        Raises:
            UpstreamUnavailable: it could not be reached; nothing was sent.
            UpstreamLost: the connection broke during the call; the outcome is unknown.
        """
        connection = await self._connection(spec)
        client = connection.client
        if client is None:
            raise UpstreamUnavailable(f"{spec.name}: {connection.error!r}")
        sent_meta = cast(RequestParamsMeta, meta) if meta else None
        try:
            if unchecked:
                params = CallToolRequestParams(name=name, arguments=arguments, _meta=sent_meta)
                return await client.session.send_request(
                    CallToolRequest(params=params), CallToolResult
                )
            return await client.call_tool(name, arguments, meta=sent_meta)
        except MCPError as exc:
            if exc.code in _LOST:
                connection.done.set()
                raise UpstreamLost(f"{spec.name}: {exc}") from exc
            # The upstream answered with a protocol error: it refused the call.
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
        except Exception as exc:
            connection.done.set()
            raise UpstreamLost(f"{spec.name}: {exc!r}") from exc

    async def close(self) -> None:
        """Close every connection (stdio upstreams exit)."""
        for connection in self._connections.values():
            connection.done.set()
            if connection.task is not None:
                with contextlib.suppress(BaseException):
                    await connection.task
        self._connections.clear()


pool = UpstreamPool()
