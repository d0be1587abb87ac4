"""Memory items' rows through the seam (``memory.rows.ItemRows``, installed by
``RunsConfig.ready``): a put's locked read of the item, its audit chain's head and an event
id in one round trip, and its writes held and sent with its audit event's."""

from __future__ import annotations

from contextlib import AbstractContextManager

from django.db import connection

from memory.models import MemoryItem, MemoryVersion
from memory.rows import search_vector_sql
from runs.store import inserts, rows, writes
from runs.store.audit import prefetch_chains
from runs.store.pipeline import Write, current_batch
from runs.store.transaction import pipelined_atomic

_ITEM = 'project_id = %s AND namespace_path = %s AND "key" = %s'


class SeamItemRows:
    """``memory.rows.ItemRows`` through ``runs.store``: pipelined on PostgreSQL inside
    ``transaction`` (a block nested in another transaction runs statement by statement)."""

    def transaction(self) -> AbstractContextManager[object]:
        return pipelined_atomic()

    def locked_item(
        self, *, project_id: int, path: str, key: str, new_chain: str
    ) -> MemoryItem | None:
        batch = current_batch()
        if batch is None or not new_chain:
            found = rows.select(MemoryItem, _ITEM, [project_id, path, key], lock=True)
            return found[0] if found else None
        # The item's lock first, then the chain's head (lock order: item, then its chain).
        read = rows.select_later(MemoryItem, _ITEM, [project_id, path, key], lock=True)
        prefetch_chains([new_chain], 1)
        batch.sync()
        found = read()
        return found[0] if found else None

    def insert(self, row: MemoryItem | MemoryVersion) -> None:
        inserts.insert([row], returning=False)
        if isinstance(row, MemoryItem):
            self._search_vector(row)

    def update(self, item: MemoryItem) -> None:
        writes.update(item, guard={"version": item.version - 1})
        self._search_vector(item)

    def _search_vector(self, item: MemoryItem) -> None:
        # SQLite has no tsvector: its search matches substrings of the text instead.
        if connection.vendor == "postgresql":
            table = MemoryItem._meta.db_table
            inserts.execute(Write(search_vector_sql(), [item.pk], table=table, row=item.pk))
