"""The asynchronous client (``AsyncClient``) and run handle (``AsyncRunHandle``)."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from agentops_client import _protocol as p
from agentops_client.artifacts import AsyncArtifactMethods
from agentops_client.errors import (
    AgentOpsError,
    Conflict,
    IdempotencyMismatch,
    PreconditionFailed,
    ToolFailed,
)
from agentops_client.models import AgentState, Approval, Rejected, Run, Session, Step

F = TypeVar("F", bound=Callable[..., Any])

_current_step: contextvars.ContextVar[Step | None] = contextvars.ContextVar(
    "agentops_current_step", default=None
)


def current_step() -> Step | None:
    """The client step whose tool is running (inside ``call_tool``'s function: its
    ``idempotency_key`` lets the tool make its own effect exactly-once), or None."""
    return _current_step.get()


T = TypeVar("T")


class AsyncClient(AsyncArtifactMethods):
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
    ) -> Run:
        """Create a client run. ``budget``: ``max_tokens`` (tokens), ``max_cost_usd`` (USD),
        ``max_steps``, ``deadline`` (ISO 8601), ``on_exceed`` (``fail`` | ``approve``).
        ``project``: the project's slug (default: the token's project). ``state_schema``:
        ``{"name", "version"?}``, the project's state schema the agent's state follows
        (default version: the newest). ``session``: the id or external id of the open session
        the run belongs to (``NotFound`` when none).

        Raises:
            BadRequest: a malformed goal, metadata or budget, a project outside the token's,
                or a state schema the project does not have.
        """
        body: dict[str, Any] = {"agent": "client", "goal": goal, "metadata": metadata or {}}
        if budget is not None:
            body["budget"] = budget
        if project is not None:
            body["project"] = project
        if state_schema is not None:
            body["state_schema"] = state_schema
        if session is not None:
            body["session"] = session
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
    ) -> Run:
        """Append a model turn: OpenAI chat ``messages`` and the call's ``usage`` (``model``,
        ``input_tokens``, ``output_tokens``, ``cost_usd`` in USD, ``latency_ms``)."""
        body: dict[str, Any] = {"messages": messages}
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

    # --- the agent's own state ------------------------------------------------------------

    async def get_state(self, run_id: str, version: int | None = None) -> AgentState:
        """Version ``version`` of the run's agent state (default: the current one), with the
        ETag to make the next write against. Raises ``NotFound`` (no such run or version)."""
        params = {} if version is None else {"version": version}
        body, headers = await self._exchange("GET", f"/runs/{run_id}/state/", params=params)
        return AgentState.from_json(body, headers.get("ETag", ""))

    async def put_state(
        self,
        run_id: str,
        state: dict[str, Any],
        *,
        base: AgentState | int,
        rationale: str = "",
        step_index: int | None = None,
    ) -> AgentState:
        """Replace the run's agent state by ``state`` (a JSON object), a write made against
        ``base`` (the version read, or its number): the new version.

        Raises:
            PreconditionFailed: ``base`` is no longer the current version (nothing changed).
            BadRequest: not a JSON object, too deep, a bad ``step_index`` or ``rationale``.
            TooLarge: over the server's size limit.
            Conflict: the run is finished.
        """
        document = p.check_json(state, "state")
        return await self._write_state(
            f"/runs/{run_id}/state/",
            run_id,
            "PUT",
            "application/json",
            document,
            base,
            rationale,
            step_index,
        )

    async def patch_state(
        self,
        run_id: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        base: AgentState | int,
        rationale: str = "",
        step_index: int | None = None,
    ) -> AgentState:
        """Patch the run's agent state, a write made against ``base`` (the version read, or
        its number): ``patch`` is a JSON Patch (RFC 6902) when it is a list of operations,
        else a JSON Merge Patch (RFC 7396: ``None`` deletes a member). The new version.

        Raises:
            PreconditionFailed: ``base`` is no longer the current version (nothing changed).
            Conflict: a JSON Patch that does not apply (a missing path, a failed ``test``), or
                the run is finished.
            BadRequest, TooLarge: as ``put_state``.
        """
        media = p.JSON_PATCH if isinstance(patch, list) else p.MERGE_PATCH
        document = p.check_json(patch, "patch")
        return await self._write_state(
            f"/runs/{run_id}/state/",
            run_id,
            "PATCH",
            media,
            document,
            base,
            rationale,
            step_index,
        )

    async def _write_state(
        self,
        path: str,
        owner_id: str,
        method: str,
        media: str,
        document: Any,
        base: AgentState | int,
        rationale: str,
        step_index: int | None,
    ) -> AgentState:
        params: dict[str, Any] = {"rationale": rationale} if rationale else {}
        if step_index is not None:
            params["step_index"] = step_index
        etag = base.etag if isinstance(base, AgentState) else p.state_etag(owner_id, base)
        # Tried once: a write whose answer was lost may have been applied, and sent again it
        # would be refused (412) as if another writer had won.
        body, headers = await self._exchange(
            method,
            path,
            document,
            headers={"If-Match": etag},
            media=media,
            params=params,
            attempts=1,
        )
        return AgentState.from_json(body, headers.get("ETag", ""))

    async def update_state(
        self,
        run_id: str,
        fn: Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]],
        *,
        rationale: str = "",
        step_index: int | None = None,
        attempts: int = 10,
    ) -> AgentState:
        """Change the run's agent state with ``fn`` without losing another writer's update:
        read the current version, write ``fn(state)`` (``fn`` gets a copy and returns the new
        state object; it may be async) against it, and when another write came first (412),
        read again and call ``fn`` again, up to ``attempts`` times. The new version.

        Raises:
            PreconditionFailed: every one of the ``attempts`` writes lost its race.
            ValueError: ``attempts`` is below 1.
        """
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        for attempt in range(1, attempts + 1):
            current = await self.get_state(run_id)
            new = fn(copy.deepcopy(current.state))
            if inspect.isawaitable(new):
                new = await new
            try:
                return await self.put_state(
                    run_id, new, base=current, rationale=rationale, step_index=step_index
                )
            except PreconditionFailed:
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # --- sessions ---------------------------------------------------------------------------

    async def create_session(
        self,
        external_id: str,
        *,
        subject: str = "",
        metadata: dict[str, Any] | None = None,
        project: str | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """Open a session: ``external_id`` is your own name for it (unique in the project),
        ``subject`` the end user's subject id (what ``erase_subject`` finds it by).

        Raises:
            Conflict: the project has a session with this ``external_id`` already.
            BadRequest: a malformed field.
        """
        body: dict[str, Any] = {"external_id": external_id, "subject": subject}
        if metadata is not None:
            body["metadata"] = metadata
        if project is not None:
            body["project"] = project
        return Session.from_json(await self._request("POST", "/sessions/", body, idempotency_key))

    async def get_session(self, session_id: str) -> Session:
        """The session as it is now. Raises ``NotFound``."""
        return Session.from_json(await self._request("GET", f"/sessions/{session_id}/"))

    async def list_sessions(self, **filters: str) -> list[Session]:
        """The first page of sessions, newest first, filtered by ``external_id``,
        ``subject``, ``status``, ``project``, ``created_from``, ``created_to``."""
        page = await self._request("GET", "/sessions/", **filters)
        return [Session.from_json(found) for found in page["results"]]

    async def close_session(self, session_id: str) -> Session:
        """Close the session: no more runs, items or state writes."""
        path = f"/sessions/{session_id}/close/"
        return Session.from_json(await self._request("POST", path, {}))

    async def add_session_items(
        self, session_id: str, items: list[dict[str, Any]], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Add conversation ``items`` (OpenAI chat messages or Responses-API input items,
        kept verbatim) to the session: ``{"added", "first_position", "message_count",
        "context_tokens"}``. Raises ``Conflict`` (closed) or ``BadRequest``."""
        path = f"/sessions/{session_id}/messages/"
        added: dict[str, Any] = await self._request("POST", path, {"items": items}, idempotency_key)
        return added

    async def session_messages(self, session_id: str, *, last: int = 50) -> dict[str, Any]:
        """The session's ``last`` latest messages (1-1000), oldest first, removed ones marked
        (``removed_at``): ``{"messages": [...], "message_count": N}``."""
        path = f"/sessions/{session_id}/messages/"
        page: dict[str, Any] = await self._request("GET", path, last=last)
        return page

    async def session_context(self, session_id: str) -> dict[str, Any]:
        """The session's active context: ``{"messages": [...], "tokens": N, "compactions":
        [...]}``: items neither removed nor compacted, each compaction's summary (a
        ``system`` message) in place of the items it replaced."""
        found: dict[str, Any] = await self._request("GET", f"/sessions/{session_id}/context/")
        return found

    async def pop_session_item(self, session_id: str) -> dict[str, Any] | None:
        """Take the latest item out of the session's active context and return it (None:
        empty); the server keeps it, marked removed."""
        path = f"/sessions/{session_id}/messages/pop/"
        popped: dict[str, Any] = await self._request("POST", path, {})
        item: dict[str, Any] | None = popped["item"]
        return item

    async def clear_session(self, session_id: str) -> int:
        """Empty the session's active context (items kept, marked removed); how many."""
        cleared = await self._request("POST", f"/sessions/{session_id}/clear/", {})
        return int(cleared["removed"])

    async def compact_session(
        self,
        session_id: str,
        summary: str | None = None,
        *,
        first: int | None = None,
        last: int | None = None,
    ) -> dict[str, Any]:
        """Replace items ``first`` to ``last`` (session positions) in the session's active
        context by ``summary``, or, with no arguments, let the server's summarizer choose.
        Returns the compaction. Raises ``BadRequest`` or ``Conflict``."""
        body: dict[str, Any] = {}
        if summary is not None:
            body = {"summary": summary, "first": first, "last": last}
        made: dict[str, Any] = await self._request("POST", f"/sessions/{session_id}/compact/", body)
        return made

    async def get_session_state(self, session_id: str, version: int | None = None) -> AgentState:
        """Version ``version`` of the session's state (default: the current), with its ETag."""
        params = {} if version is None else {"version": version}
        path = f"/sessions/{session_id}/state/"
        body, headers = await self._exchange("GET", path, params=params)
        return AgentState.from_json(body, headers.get("ETag", ""))

    async def put_session_state(
        self,
        session_id: str,
        state: dict[str, Any],
        *,
        base: AgentState | int,
        rationale: str = "",
    ) -> AgentState:
        """Replace the session's state, a write made against ``base``: as ``put_state``."""
        document = p.check_json(state, "state")
        return await self._write_state(
            f"/sessions/{session_id}/state/",
            session_id,
            "PUT",
            "application/json",
            document,
            base,
            rationale,
            None,
        )

    async def patch_session_state(
        self,
        session_id: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        base: AgentState | int,
        rationale: str = "",
    ) -> AgentState:
        """Patch the session's state, a write made against ``base``: as ``patch_state``."""
        media = p.JSON_PATCH if isinstance(patch, list) else p.MERGE_PATCH
        document = p.check_json(patch, "patch")
        return await self._write_state(
            f"/sessions/{session_id}/state/",
            session_id,
            "PATCH",
            media,
            document,
            base,
            rationale,
            None,
        )

    async def erase_subject(self, subject: str, *, project: str | None = None) -> dict[str, Any]:
        """Erase ``subject``'s sessions, their runs' conversations and state (project admins
        only; idempotent): the counts. Raises ``PermissionDenied``."""
        params = {} if project is None else {"project": project}
        path = f"/subjects/{quote(subject, safe='')}/"
        done: dict[str, Any] = await self._request("DELETE", path, **params)
        return done

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
    ) -> AsyncRunHandle:
        """Create a client run and return its handle (see ``create_run``). With the same
        ``idempotency_key`` a restarted client gets the same run back."""
        run = await self.create_run(
            goal, metadata=metadata, budget=budget, idempotency_key=idempotency_key
        )
        return AsyncRunHandle(self, run.id)

    def resume(self, run_id: str) -> AsyncRunHandle:
        """Reattach to a run after a crash: the same calls, made again, get the same steps."""
        return AsyncRunHandle(self, run_id)


class AsyncRunHandle:
    """A client run this process drives: calls its tools through agentops and records its
    model turns. Call ids and turn ids make every request repeatable after a crash."""

    def __init__(self, client: AsyncClient, run_id: str) -> None:
        self.client, self.run_id = client, run_id
        self._calls = 0
        self._turns = 0
        self._call_ids: Counter[str] = Counter()

    async def call_tool(
        self,
        name: str,
        args: dict[str, Any],
        fn: Callable[..., Any],
        *,
        args_schema: dict[str, Any] | None = None,
        call_id: str = "",
        rationale: str = "",
        error_when: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Run the tool ``name`` under agentops: append a client step, wait for its gate, run
        ``fn(**args)`` (the final arguments: a reviewer may have edited them; ``fn`` may be
        async; a plain function runs in a worker thread) and report what it returned. A step
        already on record (a restarted client) returns its recorded result without running
        ``fn``. ``error_when(result)`` (optional) tells the tool's error answers (such as
        ``"Error: ..."`` strings): those are reported as tool errors (``report(is_error=)``).

        Returns the result, or a ``Rejected`` when a reviewer refused the call.

        Raises:
            ToolFailed: ``fn`` raised, or returned something that is not JSON (the error is
                reported; the run fails).
            StepFailed: the step failed, was cancelled or skipped.
            AgentOpsError: the server refused a request.
        """
        self._calls += 1
        if call_id:
            # The same call id twice in one run (models repeat them) still names two calls.
            self._call_ids[call_id] += 1
            call_id = f"{call_id}#{self._call_ids[call_id]}"
        key = p.call_key(self.run_id, self._calls, name, args, call_id)
        step = await self.client.append_step(
            self.run_id,
            name,
            args,
            args_schema=args_schema,
            rationale=rationale,
            idempotency_key=key,
        )
        if step.replayed or not step.settled:
            # A replayed answer is the step as it was when first appended: read it again.
            step = await self.client.wait_for_step(self.run_id, step.id)
        outcome = p.outcome_of(step)
        if outcome.kind != "run":
            return outcome.value
        token = _current_step.set(step)
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(**step.args)
            else:
                # A plain function may block (a database call): off the event loop.
                value = await asyncio.to_thread(fn, **step.args)
                if inspect.isawaitable(value):
                    value = await value
            result = p.check_json(value, "the tool's result")
        except Exception as exc:
            await self._report(step, p.error_report(exc))
            raise ToolFailed(f"{name} raised {type(exc).__name__}: {exc}") from exc
        finally:
            _current_step.reset(token)
        body = {"result": result, "is_error": bool(error_when is not None and error_when(result))}
        done = await self._report(step, body)
        return p.outcome_of(done).value

    async def _report(self, step: Step, body: dict[str, Any]) -> Step:
        try:
            if "error" in body:
                return await self.client.report(self.run_id, step.id, error=body["error"])
            return await self.client.report(
                self.run_id, step.id, result=body["result"], is_error=body["is_error"]
            )
        except Conflict as exc:
            if not p.already_reported(exc):
                raise
            return await self.client.get_step(self.run_id, step.id)

    def tool(self, fn: F) -> F:
        """Decorator: calling ``fn(**kwargs)`` runs it under agentops (``call_tool``) and
        returns its result or a ``Rejected``."""

        @functools.wraps(fn)
        async def wrapper(**kwargs: Any) -> Any:
            return await self.call_tool(fn.__name__, kwargs, fn)

        return wrapper  # type: ignore[return-value]

    async def record_turn(
        self,
        messages: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        *,
        turn_id: str = "",
    ) -> Run:
        """Record a model turn (``AsyncClient.append_messages``), once even when a restarted
        client records it again."""
        self._turns += 1
        key = f"{self.run_id}:turn:{turn_id or self._turns}"
        try:
            return await self.client.append_messages(
                self.run_id, messages, usage, idempotency_key=key
            )
        except IdempotencyMismatch:
            # Recorded before a crash, with figures (latency) that differ this time.
            return await self.client.get_run(self.run_id)

    async def complete(self) -> Run:
        """The client appends no more steps (a repeat is harmless)."""
        try:
            return await self.client.complete_run(self.run_id)
        except Conflict:
            return await self.client.get_run(self.run_id)

    async def wait_finished(self, *, timeout: float | None = None) -> Run:
        """The run once it succeeded, failed or was cancelled.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """

        async def check() -> Run | None:
            run = await self.client.get_run(self.run_id)
            return run if run.finished else None

        return await self.client.watch(self.run_id, check, timeout=timeout)


__all__ = ["AgentOpsError", "AsyncClient", "AsyncRunHandle", "Rejected"]
