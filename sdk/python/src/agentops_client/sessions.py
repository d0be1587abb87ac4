"""Sessions in the SDK: open, read, list and close sessions, their conversation items and
context, compaction, and erasing a subject's sessions. ``AsyncSessionMethods`` is a base of
``AsyncClient``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from agentops_client.models import Session


class AsyncSessionMethods:
    """The session methods of ``AsyncClient``."""

    # ``AsyncClient``'s request method, which these methods send through: its parsed JSON.
    _request: Callable[..., Awaitable[Any]]

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

    async def erase_subject(self, subject: str, *, project: str | None = None) -> dict[str, Any]:
        """Erase ``subject``'s sessions, their runs' conversations and state (project admins
        only; idempotent): the counts. Raises ``PermissionDenied``."""
        params = {} if project is None else {"project": project}
        path = f"/subjects/{quote(subject, safe='')}/"
        done: dict[str, Any] = await self._request("DELETE", path, **params)
        return done
