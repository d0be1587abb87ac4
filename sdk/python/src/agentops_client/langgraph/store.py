"""``AgentOpsStore``: a LangGraph store (``langgraph.store.base.BaseStore``, sync and async)
whose items are agentops memory items (``/api/v1/memory/``, through ``AsyncMemory``), so a
graph's long-term memory is audited, versioned, reviewable and under retention.

LangGraph's operations map one to one: ``PutOp`` is a memory put (``value=None``: a
delete), ``GetOp`` a get, ``SearchOp`` a search, ``ListNamespacesOp`` a namespace listing.
Differences from LangGraph's own stores, on purpose:

- No vector search. ``index=`` (an ``IndexConfig``) is refused; ``query`` is PostgreSQL
  full-text search (stemmed English, ``websearch_to_tsquery`` syntax), ranked by
  ``ts_rank`` (``SearchItem.score``), and keeps only the items that match it (LangGraph's
  stores without an index ignore ``query``). A put's ``index`` picks what that search reads:
  None every string of the value, a list of paths (``"title"``, ``"notes[*].text"``) the
  strings at those paths, False nothing.
- TTLs are whole seconds: ``ttl`` (minutes) is rounded up to the next second. Expired items
  are never read (``TTLConfig``'s ``omit_expired`` is always on) and agentops' beat deletes
  them (``sweep_interval_minutes`` is not used).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from typing import Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from agentops_client.memory import AsyncMemory, MemoryItem
from agentops_client.sync import Client

# The server's largest page of search hits or namespaces (``memory.selectors.MAX_LIMIT``):
# a larger ``limit`` is read in pages of this size.
PAGE: Final = 100
WILDCARD: Final = "*"


def ttl_seconds(minutes: float) -> int:
    """LangGraph's ``ttl`` (minutes, > 0) as agentops' whole seconds, rounded up so that an
    item never expires before it was asked to (to the microsecond first: ``3 / 60`` minutes
    is 3 s, not the 4 s its float product would round up to).

    Raises:
        ValueError: ``minutes`` is not above zero.
    """
    if not minutes > 0:
        raise ValueError(f"ttl must be a positive number of minutes, not {minutes!r}")
    return math.ceil(round(minutes * 60, 6))


def _merged(paths: Sequence[Sequence[str]], *, at_end: bool) -> tuple[str, ...] | None:
    """One pattern that a namespace matches exactly when it matches every one of ``paths``
    (prefixes, or with ``at_end`` suffixes; ``*`` matches any one label), or None when no
    namespace can match them all (two different labels at one place)."""
    width = max((len(path) for path in paths), default=0)
    merged = [WILDCARD] * width
    for path in paths:
        aligned = (width - len(path)) if at_end else 0
        for place, label in enumerate(path, start=aligned):
            if label == WILDCARD:
                continue
            if merged[place] not in (WILDCARD, label):
                return None
            merged[place] = label
    return tuple(merged)


def _item(found: MemoryItem) -> Item:
    return Item(
        namespace=found.namespace,
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
    )


def _hit(found: MemoryItem) -> SearchItem:
    return SearchItem(
        namespace=found.namespace,
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
        score=found.score,
    )


class AgentOpsStore(BaseStore):
    """A LangGraph store backed by agentops memory.

    ``client`` is an agentops ``Client`` (its token's project holds the items; ``project``, a
    slug, names another where the token's user may act: reads need any role, writes an
    operator's); ``ttl`` LangGraph's ``TTLConfig`` (``default_ttl`` in minutes for puts that
    give none, ``refresh_on_read`` the default of ``refresh_ttl`` on ``get`` and ``search``,
    True when unset). Use it as any store::

        with Client(url, token) as client:
            graph = builder.compile(checkpointer=AgentOpsSaver(client), store=AgentOpsStore(client))

    ``batch`` and ``abatch`` run their reads (gets, searches, listings) first, together,
    then their writes, together, the last write of a key winning: the reads see the store
    as it was before the batch, as LangGraph's ``InMemoryStore`` and ``PostgresStore`` do.

    Raises (from the methods): ``InvalidNamespaceError`` for a bad label before any request;
    the client's errors (``agentops_client.errors``) for what the server refuses:
    ``BadRequest`` (a namespace over 20 labels or 1000 characters, a value over 256 KiB is
    ``TooLarge``, an offset over 10,000, a bad filter), ``PermissionDenied`` (a write with a
    viewer's token).
    """

    supports_ttl = True

    def __init__(
        self,
        client: Client,
        *,
        project: str | None = None,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
    ) -> None:
        """Raises ``NotImplementedError`` when ``index`` is given: agentops memory has no
        vector search (``query`` is full-text search without it)."""
        if index is not None:
            raise NotImplementedError(
                "AgentOpsStore has no vector (semantic) search: agentops memory searches "
                "text with PostgreSQL full-text search, which search(query=...) uses without "
                "any index configuration; create the store without index="
            )
        self.client = client
        self.memory = AsyncMemory(client.aio, project=project)
        self.ttl_config = ttl

    # --- how sync and async calls reach the client's loop ------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (see the class), blocking on the client's loop thread; one result per
        op, in order: an ``Item`` or None (get), a list of ``SearchItem`` (search), a list
        of namespaces (listing), None (put)."""
        return self.client.submit(self._batch(list(ops))).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` awaited from any event loop."""
        return await asyncio.wrap_future(self.client.submit(self._batch(list(ops))))

    # --- the operations, on the client's loop ------------------------------------------

    async def _batch(self, ops: list[Op]) -> list[Result]:
        for op in ops:
            if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
                raise ValueError(f"unknown store operation: {type(op).__name__}")
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        reads = [(n, op) for n, op in enumerate(ops) if not isinstance(op, PutOp)]
        found = await asyncio.gather(*(self._read(op) for _, op in reads))
        for (n, _), result in zip(reads, found, strict=True):
            results[n] = result
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                last[(tuple(op.namespace), op.key)] = op
        await asyncio.gather(*(self._write(op) for op in last.values()))
        return results

    async def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            got = await self.memory.get(op.namespace, op.key, refresh_ttl=op.refresh_ttl)
            return None if got is None else _item(got)
        if isinstance(op, SearchOp):
            return await self._search(op)
        assert isinstance(op, ListNamespacesOp)
        return await self._list_namespaces(op)

    async def _write(self, op: PutOp) -> None:
        if op.value is None:
            await self.memory.delete(op.namespace, op.key)
            return
        value = dict(op.value)
        text: str | None = None
        if op.index is False:
            text = ""
        elif op.index is not None:
            text = "\n".join(
                found for path in op.index for found in get_text_at_path(value, tokenize_path(path))
            )
        ttl = None if op.ttl is None else ttl_seconds(op.ttl)
        await self.memory.put(op.namespace, op.key, value, text=text, ttl_seconds=ttl)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        hits: list[SearchItem] = []
        while len(hits) < op.limit:
            want = min(PAGE, op.limit - len(hits))
            page = await self.memory.search(
                op.namespace_prefix,
                query=op.query or None,
                filter=op.filter,
                limit=want,
                offset=op.offset + len(hits),
                refresh_ttl=op.refresh_ttl,
            )
            hits.extend(_hit(found) for found in page)
            if len(page) < want:
                break
        return hits

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        unknown = {c.match_type for c in conditions} - {"prefix", "suffix"}
        if unknown:
            raise ValueError(f"unknown namespace match type: {', '.join(sorted(unknown))}")
        prefix = _merged([c.path for c in conditions if c.match_type == "prefix"], at_end=False)
        suffix = _merged([c.path for c in conditions if c.match_type == "suffix"], at_end=True)
        if prefix is None or suffix is None:
            return []
        found: list[tuple[str, ...]] = []
        while len(found) < op.limit:
            want = min(PAGE, op.limit - len(found))
            page = await self.memory.list_namespaces(
                prefix=prefix,
                suffix=suffix,
                max_depth=op.max_depth,
                limit=want,
                offset=op.offset + len(found),
            )
            found.extend(page)
            if len(page) < want:
                break
        return found
