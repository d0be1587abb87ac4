"""The gateway endpoint: ``/mcp/<upstream>/``, an MCP server (streamable HTTP, the ``mcp``
SDK's session manager) in front of each upstream.

A request must carry an agentops API token (``Authorization: Bearer <token>``, or ``Token
<token>``) whose user may create and drive runs in the token's project: else 401 or 403 (429
past the REST API's bad-token limit, ``agentops.bad_tokens``), before any MCP message is
read. ``tools/list`` answers the upstream's tools. ``tools/call`` becomes a step of the
session's run (``gateway.calls``): a call that needs no approval is forwarded at once; one
that waits for a reviewer keeps its request open, with a progress notification every
``AGENTOPS_MCP_PROGRESS_SECONDS`` (when the client asked for progress), until the approval is
decided. Approved, the upstream receives exactly the step's arguments as approved (edits
included), and in ``_meta`` the client's own entries plus the step's idempotency key
(``agentops/idempotency-key``) and the session's run id (``agentops/run``); rejected
or expired, the client gets an ``isError`` result with the reason and the upstream is never
called. A connection lost during the upstream call leaves the step's outcome unknown: it is
not repeated. An answer of a tool that declares an ``outputSchema`` is checked against it
(``calls.output_failure``, MCP 2025-06-18): one that fails it fails the step
(``validation_failed``, the answer kept in the ledger) and the client gets ``isError`` with
the reason. A session the client ends (``DELETE``) completes its run.

A session belongs to the caller that opened it: the token's user in the token's project.
Any other caller naming its ``Mcp-Session-Id`` (a call, its event stream, its ``DELETE``) is
answered 404, as for a session that does not exist, and changes nothing: the SDK's session
manager compares the principal in ``scope["user"]`` (``sdk_principal``) with the one that
opened the session, and ``gateway.calls`` checks the run's owner again in the database. A
request of the sessionless protocol (2026-07-28) that names a session is answered 404 too:
the SDK serves it without its session manager, so nothing would have checked that session.

The step is committed before the upstream is called, always. The upstream's answer is
committed before the client gets it, except for a read-only call (``calls.read_only_call``: the
tool declares ``readOnlyHint`` and its risk is low), whose answer changes nothing: it goes out
at once, and its record is queued on the database thread ahead of any later work of the
process (so the session's next call, or its end, finds it recorded). A crash between the two
leaves that step running, as a crash during the upstream call does.

Who may call is checked by ``gateway.admission`` (kept per token while nothing changed), and
every database step of a request runs on the gateway's own database thread
(``gateway.dbthread``): a call makes three hops there, its admission, its step before the
upstream call, its outcome after (awaited, or for a read-only call queued).

Sessions are the handshake-era kind (``initialize``, ``Mcp-Session-Id``): a session is what
makes a run, so ``server/discover`` is answered "method not found" and clients fall back to
the handshake.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from typing import Any

from django.conf import settings
from django.utils import timezone
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.types import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    RequestParams,
    TextContent,
    Tool,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from agentops.addresses import scope_address
from agentops.errors import Conflict, InvalidInput
from gateway import calls
from gateway.admission import Admitted, Caller, admit
from gateway.dbthread import in_database, in_database_soon
from gateway.models import Upstream
from gateway.upstream import UpstreamLost, UpstreamSpec, UpstreamUnavailable, fetch_tools, pool
from runs.statuses import StepStatus

logger = logging.getLogger(__name__)

PREFIX = "/mcp/"
# The client's progress token in a request's ``_meta`` (the SDK's name, and the wire's).
_PROGRESS_KEYS = ("progress_token", "progressToken")
DECIDING = (StepStatus.PENDING, StepStatus.WAITING, StepStatus.QUEUED, StepStatus.WAITING_RETRY)


def sdk_principal(caller: Caller) -> AuthenticatedUser:
    """``caller`` as the ``mcp`` SDK's session manager identifies who opened a session: it
    keeps the (``client_id``, issuer, ``subject``) of ``scope["user"]`` (an
    ``AuthenticatedUser``) of the request that opened it, and answers any later request of
    the session whose triple differs "Session not found", 404
    (``StreamableHTTPSessionManager._handle_stateful_request``, mcp 2.3). The token's project
    is the client, its user the subject; the token itself is not needed for the comparison
    and is left out."""
    user_id = caller.actor.user.pk
    access = AccessToken(
        token="",  # no token is kept: only the principal is compared
        client_id=f"agentops-project:{caller.project_id}",
        subject=f"agentops-user:{user_id}",
        scopes=[],
    )
    return AuthenticatedUser(access)


def _text_result(text: str, *, error: bool = True) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


async def _answer(send: Any, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Mounted:
    """The MCP server of one upstream and its running session manager."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server: Server[Any] = Server(
            f"agentops gateway to {name}",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )
        self.server.add_request_handler("server/discover", RequestParams, self._no_discover)
        self.manager = StreamableHTTPSessionManager(app=self.server)
        self._started = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._serve())
        await self._started.wait()

    async def _serve(self) -> None:
        async with self.manager.run():
            self._started.set()
            await asyncio.Event().wait()

    async def _no_discover(self, ctx: Any, params: Any) -> Any:
        raise MCPError(METHOD_NOT_FOUND, "server/discover: this gateway speaks the handshake")

    async def _upstream(self, ctx: Any) -> Upstream:
        # Read by ``Gateway`` for this very HTTP request.
        upstream: Upstream = ctx.request.scope["agentops.upstream"]
        if not upstream.tools:
            upstream.tools = await fetch_tools(UpstreamSpec.of(upstream))
            upstream.tools_fetched_at = timezone.now()
            await in_database(upstream.save, update_fields=["tools", "tools_fetched_at"])
        return upstream

    async def list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        """The upstream's tools, as last fetched, that the caller's grants allow (its token's
        and its project's: ``calls.granted_tools``)."""
        upstream = await self._upstream(ctx)
        caller: Caller = ctx.request.scope["agentops.caller"]
        tools = await in_database(
            calls.granted_tools,
            tools=upstream.tools,
            project_id=caller.project_id,
            token_grant=caller.token_grant,
        )
        return ListToolsResult(tools=[Tool.model_validate(tool) for tool in tools])

    async def call_tool(self, ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        """One ``tools/call``: its step, the wait for a reviewer if it needs one, the upstream
        call exactly once, its outcome recorded (see the module docstring)."""
        caller: Caller = ctx.request.scope["agentops.caller"]
        session_id = ctx.request.headers.get("mcp-session-id") or ""
        if not session_id:
            return _text_result("agentops: this gateway needs an MCP session (initialize first)")
        upstream = await self._upstream(ctx)
        tool = upstream.tool(params.name)
        if tool is None:
            return _text_result(f"agentops: {upstream.name} has no tool {params.name!r}")
        client_params = ctx.session.client_params
        try:
            step = await in_database(
                calls.session_call_step,
                upstream=upstream,
                session_id=session_id,
                actor=caller.actor,
                project_id=caller.project_id,
                client_info=client_params.client_info if client_params else None,
                tool=params.name,
                args=dict(params.arguments or {}),
                spec=tool,
                token_grant=caller.token_grant,
            )
        except calls.NoSuchSession:
            # The session manager refuses another caller's session before this: this is the
            # database's word on the same rule.
            raise MCPError(INVALID_REQUEST, "Session not found") from None
        except (InvalidInput, Conflict) as exc:
            return _text_result(f"agentops refused the call: {exc}")
        step = await self._decided(ctx, params, step)
        sent = dict(params.arguments or {})
        if step.args == sent:
            # The approved arguments are the client's: send them as it ordered them (the
            # database keeps JSON objects with its own key order, and tools may echo it).
            step = dataclasses.replace(step, args=sent)
        if step.status == StepStatus.READY:
            meta = {k: v for k, v in (params.meta or {}).items() if k not in _PROGRESS_KEYS}
            meta |= {
                "agentops/run": str(step.run_id),
                "agentops/idempotency-key": step.idempotency_key,
            }
            upstream_call = (UpstreamSpec.of(upstream), params.name, meta, tool)
            return await self._forward(upstream_call, step, caller)
        return self._settled(step)

    async def _decided(
        self, ctx: Any, params: CallToolRequestParams, step: calls.CallStep
    ) -> calls.CallStep:
        """The step once it no longer waits (for a reviewer, or for earlier steps)."""
        meta = params.meta or {}
        token = meta.get("progress_token", meta.get("progressToken"))
        every = settings.AGENTOPS_MCP_PROGRESS_SECONDS
        loop = asyncio.get_running_loop()
        last = loop.time()
        ticks = 0
        while step.status in DECIDING:
            await asyncio.sleep(settings.AGENTOPS_MCP_POLL_SECONDS)
            step = await in_database(calls.step_state, step_id=step.id)
            if token is not None and loop.time() - last >= every:
                ticks += 1
                last = loop.time()
                await ctx.session.send_progress_notification(
                    token,
                    progress=ticks,
                    message=f"{params.name}: waiting for a reviewer's approval",
                    related_request_id=ctx.request_id,
                )
        return step

    async def _forward(
        self,
        upstream_call: tuple[UpstreamSpec, str, dict[str, Any], dict[str, Any]],
        step: calls.CallStep,
        caller: Caller,
    ) -> CallToolResult:
        flight = _in_flight.get(step.id)
        if flight is not None:  # the same call, repeated while this process forwards it
            return await asyncio.shield(flight)
        future: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
        _in_flight[step.id] = future
        try:
            result = await self._call_upstream(*upstream_call, step=step, caller=caller)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            del _in_flight[step.id]

    async def _call_upstream(
        self,
        spec: UpstreamSpec,
        tool: str,
        meta: dict[str, Any],
        tool_spec: dict[str, Any],
        *,
        step: calls.CallStep,
        caller: Caller,
    ) -> CallToolResult:
        record = functools.partial(in_database, calls.step_outcome)
        try:
            result = await pool.call_tool(
                spec, tool, step.args, meta, unchecked="outputSchema" in tool_spec
            )
        except UpstreamUnavailable as exc:
            report = {
                "error": {"type": "upstream_unavailable", "message": str(exc), "retryable": True}
            }
            await record(actor=caller.actor, step=step, report=report)
            return _text_result(f"agentops: the upstream is unavailable ({exc}); try again")
        except UpstreamLost as exc:
            await record(actor=caller.actor, step=step, report={"outcome": "unknown"})
            return _text_result(
                f"agentops: the connection to the upstream broke during the call ({exc}): "
                "whether it took effect is unknown, so it is not repeated; an operator settles it"
            )
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        # An isError result is the tool's own error answer: the call happened, and the step
        # completes with it, marked a tool error.
        answered: dict[str, Any] = {"result": answer}
        if result.is_error:
            answered["is_error"] = True
        elif invalid := calls.output_failure(tool_spec, answer):
            # The call happened: the ledger keeps its result, the step fails with why.
            await record(actor=caller.actor, step=step, report=answered, invalid=invalid)
            return _text_result(f"agentops: {invalid['message']} (at {invalid['path']})")
        if step.read_only:
            # Nothing changed, so the answer needs no durable record first: it goes out now,
            # and its record is queued ahead of any later database work of this process.
            in_database_soon(calls.step_outcome, actor=caller.actor, step=step, report=answered)
        else:
            await record(actor=caller.actor, step=step, report=answered)
        return result

    @staticmethod
    def _settled(step: calls.CallStep) -> CallToolResult:
        if step.status == StepStatus.SUCCEEDED and isinstance(step.result, dict):
            return CallToolResult.model_validate(step.result)
        error = step.error or {}
        reason = error.get("reason") or error.get("message") or step.status
        kind = error.get("type") or step.status
        return _text_result(f"agentops: the call was {step.status} ({kind}): {reason}")


_in_flight: dict[int, asyncio.Future[CallToolResult]] = {}


def _sessionless(scope: dict[str, Any]) -> bool:
    """Whether the SDK serves the request by the sessionless protocol (2026-07-28), without
    its session manager and so without looking at ``Mcp-Session-Id``: it routes so a request
    whose ``mcp-protocol-version`` is not one of the handshake era's
    (``StreamableHTTPSessionManager._handle_request``, mcp 2.3)."""
    name = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
    version = next((v.decode("latin1") for k, v in scope.get("headers", []) if k == name), None)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


class Gateway:
    """The ASGI app of ``/mcp/<upstream>/``: authenticate, then hand the request to that
    upstream's MCP session manager (started on first use in this process's event loop)."""

    def __init__(self) -> None:
        self._mounted: dict[str, _Mounted] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        name = scope["path"][len(PREFIX) :].split("/", 1)[0]
        authorization = next(
            (v.decode("latin1") for k, v in scope.get("headers", []) if k == b"authorization"), ""
        )
        admitted = await in_database(
            admit, name=name, authorization=authorization, address=scope_address(scope)
        )
        if not isinstance(admitted, Admitted):
            status, detail, headers = admitted
            await _answer(send, status, detail, headers)
            return
        upstream, caller = admitted.upstream, admitted.caller
        mounted = self._mounted.get(name)
        if mounted is None:
            mounted = self._mounted[name] = _Mounted(name)
        await mounted.start()
        session_id = next(
            (v.decode("latin1") for k, v in scope.get("headers", []) if k == b"mcp-session-id"), ""
        )
        if session_id and _sessionless(scope):
            await _answer(send, 404, "Session not found", [])
            return
        if scope.get("method") == "DELETE" and session_id:
            # The client ends its session: its run appends no more steps (done before the
            # answer, so a client that saw its session end finds its run complete). Another
            # caller's DELETE ends nothing, and the session manager answers it 404.
            await in_database(
                calls.session_end,
                session_id=session_id,
                actor=caller.actor,
                project_id=caller.project_id,
            )
        scope = {
            **scope,
            "user": sdk_principal(caller),
            "agentops.caller": caller,
            "agentops.upstream": upstream,
        }
        await mounted.manager.handle_request(scope, receive, send)


gateway = Gateway()
