"""The asynchronous client (``AsyncClient``); its run handle is ``agentops_client.handle``'s."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from agentops_client import _protocol as p
from agentops_client.artifacts import AsyncArtifactMethods
from agentops_client.handle import AsyncRunHandle
from agentops_client.models import Approval, Run, Step
from agentops_client.sessions import AsyncSessionMethods
from agentops_client.state import AsyncStateMethods
from agentops_client.tracing import trace_headers

T = TypeVar("T")


class AsyncClient(AsyncArtifactMethods, AsyncStateMethods, AsyncSessionMethods):
    """An agentops client on ``httpx.AsyncClient``.

    ``base_url`` is the server (``http://host:port``); ``token`` an API token
    (``manage.py create_api_token``). Every POST carries an ``Idempotency-Key`` and is retried
    with it on network errors, 5xx and in-flight keys (``retry``); ``timeout`` is per request
    (seconds); waits use the run's WebSocket (``websocket=True``) and fall back to polling
    every ``poll_interval`` seconds. ``transport`` replaces httpx's (tests).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retry: p.Retry | None = None,
        poll_interval: float = 0.5,
        websocket: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url, self.token = base_url.rstrip("/"), token
        self.retry = retry or p.Retry()
        self.poll_interval, self.websocket = poll_interval, websocket
        self._http = httpx.AsyncClient(
            base_url=self.base_url + p.API,
            headers={"Authorization": f"Token {token}"},
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(
        self, method: str, path: str, body: Any = None, key: str | None = None, **params: Any
    ) -> Any:
        return (await self._exchange(method, path, body, key, params=params))[0]

    async def _exchange(
        self,
        method: str,
        path: str,
        body: Any = None,
        key: str | None = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        media: str | None = None,
        attempts: int | None = None,
    ) -> tuple[Any, httpx.Headers]:
        """Send a request (``body`` as JSON, of media type ``media`` when given), retried as
        ``retry`` says up to ``attempts`` tries; its parsed JSON and its headers."""
        sent = {"Idempotency-Key": key or p.new_key()} if method == "POST" else {}
        # The caller's trace context (W3C ``traceparent``), so agentops' spans join its trace.
        sent.update(trace_headers())
        sent.update(headers or {})
        content = None
        if media is not None:
            content = json.dumps(body).encode()
            sent["Content-Type"] = media
        tries = attempts or self.retry.attempts
        for attempt in range(1, tries + 1):
            last = attempt == tries
            try:
                response = await self._http.request(
                    method,
                    path,
                    json=body if content is None else None,
                    content=content,
                    headers=sent,
                    params=params or None,
                )
            except httpx.TransportError:
                if last:
                    raise
            else:
                text = response.text
                if not (p.retryable(response.status_code, text) and not last):
                    parsed = p.parse(response.status_code, text)
                    if response.headers.get("Idempotent-Replayed") == "true" and isinstance(
                        parsed, dict
                    ):
                        parsed = {**parsed, p.REPLAYED: True}
                    return parsed, response.headers
            await asyncio.sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # --- runs and steps -------------------------------------------------------------------

    async def create_run(
        self,
        goal: str,
        *,
        metadata: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
        project: str | None = None,
        state_schema: dict[str, Any] | None = None,
        session: str | None = None,
        idempotency_key: str | None = None,
        grant: dict[str, Any] | None = None,
        **identity: Any,
    ) -> Run:
        """Create a client run. ``budget``: ``max_tokens`` (tokens), ``max_cost_usd`` (USD),
        ``max_steps``, ``deadline`` (ISO 8601), ``on_exceed`` (``fail`` | ``approve``).
        ``project``: the project's slug (default: the token's project). ``state_schema``:
        ``{"name", "version"?}``, the project's state schema the agent's state follows
        (default version: the newest). ``session``: the id or external id of the open session
        the run belongs to (``NotFound`` when none). ``grant``: the tools the run may call,
        ``{"tools": [patterns], "constraints": {pattern: condition}}``; a call outside it
        comes back as a ``Rejected`` of type ``not_granted``, its tool never called.
        ``identity``: what drives the run, any of ``agent_name``, ``agent_version``,
        ``prompt`` (``{"content", "name"?, "version"?}``: the system prompt), ``model`` and
        ``model_parameters`` (a dict).

        Raises:
            BadRequest: a malformed goal, metadata, budget, grant or identity, a project outside the
                token's, or a state schema the project does not have.
        """
        body: dict[str, Any] = {
            "agent": "client",
            "goal": goal,
            "metadata": metadata or {},
            **identity,
        }
        if budget is not None:
            body["budget"] = budget
        if project is not None:
            body["project"] = project
        if state_schema is not None:
            body["state_schema"] = state_schema
        if session is not None:
            body["session"] = session
        if grant is not None:
            body["grant"] = grant
        return Run.from_json(await self._request("POST", "/runs/", body, idempotency_key))

    async def get_run(self, run_id: str) -> Run:
        """The run as it is now. Raises ``NotFound``."""
        return Run.from_json(await self._request("GET", f"/runs/{run_id}/"))

    async def get_step(self, run_id: str, step_id: int) -> Step:
        """The step as it is now, its result resolved when the server kept it as an artifact
        (``resolve_step``). Raises ``NotFound``."""
        step = Step.from_json(await self._request("GET", f"/runs/{run_id}/steps/{step_id}/"))
        return await self.resolve_step(step)

    async def append_step(
        self,
        run_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        executor: str = "client",
        args_schema: dict[str, Any] | None = None,
        rationale: str = "",
        usage: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Step:
        """Append a step (``executor`` ``client``: this client runs the tool). Raises
        ``BadRequest`` (arguments failing ``args_schema``...) or ``Conflict`` (run
        finished)."""
        body: dict[str, Any] = {
            "tool": tool,
            "args": p.check_json(args, "args"),
            "executor": executor,
            "rationale": rationale,
        }
        if args_schema is not None:
            body["args_schema"] = args_schema
        if usage is not None:
            body["usage"] = usage
        path = f"/runs/{run_id}/steps/"
        return Step.from_json(await self._request("POST", path, body, idempotency_key))

    async def report(
        self,
        run_id: str,
        step_id: int,
        *,
        result: Any = None,
        error: dict[str, Any] | None = None,
        outcome_unknown: bool = False,
        is_error: bool = False,
    ) -> Step:
        """Report what a client step's tool did: its ``result`` (JSON; with ``is_error`` when
        it is the tool's error answer: the step succeeds, marked a tool error, and the run
        goes on), an ``error`` (``{"type", "message", "retryable"}``: the tool could not be
        run) or ``outcome_unknown``. The same report again is answered the same. Raises
        ``Conflict`` (not ready, or settled differently)."""
        body: dict[str, Any]
        if outcome_unknown:
            body = {"outcome": "unknown"}
        elif error is not None:
            body = {"error": error}
        else:
            body = {"result": p.check_json(result, "result")}
            if is_error:
                # Sent only when true: a server older than tool errors refuses the key.
                body["is_error"] = True
        path = f"/runs/{run_id}/steps/{step_id}/result/"
        # A result the server kept as an artifact comes back whole (``resolve_step``).
        return await self.resolve_step(Step.from_json(await self._request("POST", path, body)))

    async def append_messages(
        self,
        run_id: str,
        messages: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **identity: Any,
    ) -> Run:
        """Append a model turn: OpenAI chat ``messages`` and the call's ``usage`` (``model``,
        ``input_tokens``, ``output_tokens``, ``cost_usd`` in USD, ``latency_ms``), and what
        drove it (``identity``: ``agent_name``, ``agent_version``, ``prompt``,
        ``model_parameters``, as ``create_run`` takes them)."""
        body: dict[str, Any] = {"messages": messages, **identity}
        if usage is not None:
            body["usage"] = usage
        path = f"/runs/{run_id}/messages/"
        return Run.from_json(await self._request("POST", path, body, idempotency_key))

    async def messages(
        self, run_id: str, *, last: int = 50, before: int | None = None
    ) -> dict[str, Any]:
        """The run's ``last`` latest messages (1-1000), of those before position ``before``
        when given: ``{"messages": [{"position", "message", "tokens", "step_index",
        "created_at"}, ...], "message_count": N}``, oldest first; pass the first
        ``position`` as ``before`` to page back."""
        params: dict[str, Any] = {"last": last}
        if before is not None:
            params["before"] = before
        page: dict[str, Any] = await self._request("GET", f"/runs/{run_id}/messages/", **params)
        return page

    async def context(self, run_id: str) -> dict[str, Any]:
        """The run's active context: ``{"messages": [...], "tokens": N, "compactions":
        [...]}``, the messages in OpenAI chat format as the model is to be sent them (each
        compaction's summary a ``system`` message in place of the messages it replaced)."""
        found: dict[str, Any] = await self._request("GET", f"/runs/{run_id}/context/")
        return found

    async def compact(
        self,
        run_id: str,
        summary: str | None = None,
        *,
        first: int | None = None,
        last: int | None = None,
    ) -> dict[str, Any]:
        """Replace messages ``first`` to ``last`` (positions) in the run's active context by
        ``summary``, or, with no arguments, let the server's summarizer choose and write it.
        Returns the compaction (range, tokens before and after, summarizer). Raises
        ``BadRequest`` (a range that cuts an earlier compaction) or ``Conflict``."""
        body: dict[str, Any] = {}
        if summary is not None:
            body = {"summary": summary, "first": first, "last": last}
        made: dict[str, Any] = await self._request("POST", f"/runs/{run_id}/compact/", body)
        return made

    async def complete_run(self, run_id: str) -> Run:
        """Say the client appends no more steps. Raises ``Conflict`` when already done."""
        return Run.from_json(await self._request("POST", f"/runs/{run_id}/complete/", {}))

    async def cancel_run(self, run_id: str, reason: str = "") -> Run:
        """Cancel the run with ``reason``."""
        body = {"reason": reason}
        return Run.from_json(await self._request("POST", f"/runs/{run_id}/cancel/", body))

    # --- reviewers ------------------------------------------------------------------------

    async def pending_approvals(self) -> list[Approval]:
        """Every pending approval request, oldest first (all pages)."""
        found: list[Approval] = []
        page = await self._request("GET", "/approvals/", status="pending")
        while True:
            found += [Approval.from_json(a) for a in page["results"]]
            if not page.get("next"):
                return found
            page = p.parse(200, (await self._http.get(page["next"])).text)

    async def approve(
        self, approval_id: int, comment: str = "", args: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Approve (with edited ``args``, optionally). Raises ``Conflict`` when decided."""
        body: dict[str, Any] = {"comment": comment}
        if args is not None:
            body["args"] = args
        result: dict[str, Any] = await self._request(
            "POST", f"/approvals/{approval_id}/approve/", body
        )
        return result

    async def reject(self, approval_id: int, reason: str) -> dict[str, Any]:
        """Reject with ``reason`` (the agent receives it)."""
        result: dict[str, Any] = await self._request(
            "POST", f"/approvals/{approval_id}/reject/", {"comment": reason}
        )
        return result

    # --- waiting --------------------------------------------------------------------------

    async def wait_for_step(
        self, run_id: str, step_id: int, *, timeout: float | None = None
    ) -> Step:
        """The step once it is ``ready`` or finished, waiting over the run's WebSocket
        (resuming with ``?after=`` when it drops) or, failing that, by polling.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """

        async def check() -> Step | None:
            step = await self.get_step(run_id, step_id)
            return step if step.settled else None

        return await self.watch(run_id, check, timeout=timeout, step_id=step_id)

    async def watch(
        self,
        run_id: str,
        check: Callable[[], Awaitable[T | None]],
        *,
        timeout: float | None = None,
        step_id: int | None = None,
    ) -> T:
        """Call ``check`` until it returns something, once after subscribing to the run's
        events and again after each event about the run (or about step ``step_id``); polls
        every ``poll_interval`` seconds when the WebSocket cannot be used.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        after: int | None = None
        while True:
            if self.websocket:
                try:
                    url = p.ws_url(self.base_url, run_id, self.token, after)
                    async with connect(url, open_timeout=10, close_timeout=1) as ws:
                        # Subscribed first, then read: no change can slip between the two.
                        while True:
                            found = await check()
                            if found is not None:
                                return found
                            after = await self._relevant_event(ws, after, deadline, step_id)
                except (OSError, WebSocketException, TimeoutError):
                    pass
            found = await check()
            if found is not None:
                return found
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"run {run_id}: still waiting after {timeout} s")
            await asyncio.sleep(self.poll_interval)

    async def _relevant_event(
        self, ws: Any, after: int | None, deadline: float | None, step_id: int | None
    ) -> int | None:
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError("deadline")
            # A quiet stream is read again at least every 30 s.
            wait = 30.0 if remaining is None else min(30.0, remaining)
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), wait))
            except TimeoutError:
                return after
            event = message.get("event") or {}
            # Resume from the server's cursor: an event's id may pass one still uncommitted.
            cursor = message.get("after")
            after = (
                cursor if isinstance(cursor, int) else max(after or 0, int(event.get("id") or 0))
            )
            if p.concerns(event, step_id):
                return after

    # --- handles --------------------------------------------------------------------------

    async def start_run(
        self,
        goal: str,
        *,
        metadata: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        grant: dict[str, Any] | None = None,
        **identity: Any,
    ) -> AsyncRunHandle:
        """Create a client run and return its handle (see ``create_run``, which takes the
        same ``identity``). With the same ``idempotency_key`` a restarted client gets the
        same run back."""
        run = await self.create_run(
            goal,
            metadata=metadata,
            budget=budget,
            idempotency_key=idempotency_key,
            grant=grant,
            **identity,
        )
        return AsyncRunHandle(self, run.id)

    def resume(self, run_id: str) -> AsyncRunHandle:
        """Reattach to a run after a crash: the same calls, made again, get the same steps."""
        return AsyncRunHandle(self, run_id)
