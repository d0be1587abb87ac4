"""The memory store from a client (``/api/v1/memory/``): ``AsyncMemory`` and ``Memory``
(sync) over an ``AsyncClient`` or ``Client``, with the operations and argument names of
LangGraph's ``BaseStore`` (``put``, ``get``, ``delete``, ``search``, ``list_namespaces``)::

    memory = Memory(client)
    item = memory.put(("project", "user:42", "preferences"), "tone", {"style": "concise"})
    memory.search(("project", "user:42"), query="concise", filter={"style": "concise"})

A namespace is a tuple of labels (non-empty, without ``.``). ``ttl_seconds`` is seconds
(LangGraph's ``ttl`` is minutes). Writes may be made against a version (``if_match``: an
item or its ETag); another version raises ``PreconditionFailed`` and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentops_client import _protocol as p
from agentops_client.aio import AsyncClient
from agentops_client.errors import NotFound
from agentops_client.sync import Client

Namespace = tuple[str, ...]
_ITEMS = "/memory/items/"


@dataclass(frozen=True)
class MemoryItem:
    """A memory item (LangGraph's ``Item``; with ``score``, its ``SearchItem``):
    ``namespace``, ``key``, ``value``, ``version`` and ``etag`` (for ``if_match``), when it
    was created and updated, ``expires_at`` (None: never), the search ``score`` (None
    outside a full-text search) and the server's whole JSON (``raw``: provenance, tags)."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    version: int
    etag: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    score: float | None = None
    id: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> MemoryItem:
        expires = body.get("expires_at")
        return cls(
            namespace=tuple(body["namespace"]),
            key=body["key"],
            value=body["value"],
            version=body["version"],
            etag=body["etag"],
            created_at=datetime.fromisoformat(body["created_at"]),
            updated_at=datetime.fromisoformat(body["updated_at"]),
            expires_at=datetime.fromisoformat(expires) if expires else None,
            score=body.get("score"),
            id=body["id"],
            raw=body,
        )


def _etag(if_match: MemoryItem | str | None) -> dict[str, str]:
    if if_match is None:
        return {}
    return {"If-Match": if_match.etag if isinstance(if_match, MemoryItem) else if_match}


def _project(project: str | None) -> dict[str, str]:
    return {} if project is None else {"project": project}


class AsyncMemory:
    """The memory store through ``client``; ``project`` (a slug) picks the project when the
    token's user has several (default: the token's)."""

    def __init__(self, client: AsyncClient, *, project: str | None = None) -> None:
        self.client, self.project = client, project

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        text: str | None = None,
        tags: list[str] | None = None,
        ttl_seconds: int | None = None,
        subject: str | None = None,
        run: str | None = None,
        step_index: int | None = None,
        session: str | None = None,
        source_message: int | None = None,
        if_match: MemoryItem | str | None = None,
    ) -> MemoryItem:
        """Create or replace the item; ``text`` is what search reads (default: the value's
        strings); ``run``/``step_index``/``session``/``source_message`` record where it came
        from; ``subject`` the end user it is about (default: the session's).

        Raises:
            PreconditionFailed: ``if_match`` is not the current version.
            BadRequest: a bad namespace, key, value or option (``field`` names it).
            TooLarge: the value is over the server's limit.
        """
        body: dict[str, Any] = {
            "namespace": list(namespace),
            "key": key,
            "value": p.check_json(value, "value"),
            **_project(self.project),
        }
        options = {
            "text": text,
            "tags": tags,
            "ttl_seconds": ttl_seconds,
            "subject": subject,
            "run": run,
            "step_index": step_index,
            "session": session,
            "source_message": source_message,
        }
        body.update({name: given for name, given in options.items() if given is not None})
        found, _ = await self.client._exchange("PUT", _ITEMS, body, headers=_etag(if_match))
        return MemoryItem.from_json(found)

    async def get(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = False
    ) -> MemoryItem | None:
        """The item, or None when there is none (or it expired)."""
        params: dict[str, Any] = {"namespace": ".".join(namespace), "key": key}
        params.update(_project(self.project))
        if refresh_ttl:
            params["refresh_ttl"] = "true"
        try:
            found, _ = await self.client._exchange("GET", _ITEMS, params=params)
        except NotFound:
            return None
        return MemoryItem.from_json(found)

    async def delete(
        self,
        namespace: Sequence[str],
        key: str,
        *,
        reason: str = "",
        if_match: MemoryItem | str | None = None,
    ) -> None:
        """Delete the item (nothing there: nothing happens), keeping ``reason`` in its
        history. Raises ``PreconditionFailed`` when ``if_match`` is not the current version."""
        params = {"namespace": ".".join(namespace), "key": key, "reason": reason}
        params.update(_project(self.project))
        await self.client._exchange("DELETE", _ITEMS, params=params, headers=_etag(if_match))

    async def search(
        self,
        namespace_prefix: Sequence[str] = (),
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
    ) -> list[MemoryItem]:
        """Items under ``namespace_prefix`` matching ``filter`` (``{"field": value}`` or
        ``{"field": {"$gt": 5}}``) and ``query`` (full text, best ranked first; without it,
        last written first); ``limit`` (up to 100) from ``offset``."""
        body: dict[str, Any] = {
            "namespace_prefix": list(namespace_prefix),
            "limit": limit,
            "offset": offset,
            "refresh_ttl": refresh_ttl,
            **_project(self.project),
        }
        if query is not None:
            body["query"] = query
        if filter is not None:
            body["filter"] = p.check_json(filter, "filter")
        found = await self.client._request("POST", "/memory/search/", body)
        return [MemoryItem.from_json(hit) for hit in found["items"]]

    async def list_namespaces(
        self,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces of live items starting with ``prefix`` and ending with ``suffix``
        (``"*"`` matches any one label), cut to ``max_depth`` labels, sorted."""
        body: dict[str, Any] = {
            "prefix": list(prefix),
            "suffix": list(suffix),
            "limit": limit,
            "offset": offset,
            **_project(self.project),
        }
        if max_depth is not None:
            body["max_depth"] = max_depth
        found = await self.client._request("POST", "/memory/namespaces/", body)
        return [tuple(labels) for labels in found["namespaces"]]

    async def history(self, item: MemoryItem | str) -> list[dict[str, Any]]:
        """Every kept version of a live item (newest first: puts and deletions, with their
        provenance)."""
        item_id = item.id if isinstance(item, MemoryItem) else item
        versions: list[dict[str, Any]] = await self.client._request(
            "GET", f"{_ITEMS}{item_id}/history/"
        )
        return versions


class Memory:
    """``AsyncMemory`` for synchronous code, through a ``Client``: the same methods, each
    blocking until the server answered."""

    def __init__(self, client: Client, *, project: str | None = None) -> None:
        self.client = client
        self.aio = AsyncMemory(client.aio, project=project)

    def put(
        self, namespace: Sequence[str], key: str, value: dict[str, Any], **options: Any
    ) -> MemoryItem:
        """See ``AsyncMemory.put``."""
        return self.client._run(self.aio.put(namespace, key, value, **options))

    def get(self, namespace: Sequence[str], key: str, **options: Any) -> MemoryItem | None:
        """See ``AsyncMemory.get``."""
        return self.client._run(self.aio.get(namespace, key, **options))

    def delete(self, namespace: Sequence[str], key: str, **options: Any) -> None:
        """See ``AsyncMemory.delete``."""
        self.client._run(self.aio.delete(namespace, key, **options))

    def search(self, namespace_prefix: Sequence[str] = (), /, **options: Any) -> list[MemoryItem]:
        """See ``AsyncMemory.search``."""
        return self.client._run(self.aio.search(namespace_prefix, **options))

    def list_namespaces(self, **options: Any) -> list[Namespace]:
        """See ``AsyncMemory.list_namespaces``."""
        return self.client._run(self.aio.list_namespaces(**options))

    def history(self, item: MemoryItem | str) -> list[dict[str, Any]]:
        """See ``AsyncMemory.history``."""
        return self.client._run(self.aio.history(item))
