"""The agent's own state in the SDK: read a run's or a session's state at a version, and
write a new version against the one read (PUT, JSON Merge Patch, JSON Patch, or a function
applied with retries on a conflict). ``AsyncStateMethods`` is a base of ``AsyncClient``."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from agentops_client import _protocol as p
from agentops_client.errors import PreconditionFailed
from agentops_client.models import AgentState


class AsyncStateMethods:
    """The agent-state methods of ``AsyncClient``, for runs and sessions."""

    # ``AsyncClient``'s request method, which these methods send through: (its parsed JSON,
    # its headers).
    _exchange: Callable[..., Awaitable[tuple[Any, httpx.Headers]]]

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

    # --- a session's state (what outlives its runs) ---------------------------------------

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
