"""The audit writer's statements through ``runs.store.rows``, and the chain heads and event ids
a pipelined transaction reads with its first reads. The SQL is audit's (``audit.chain``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection

from audit.chain import heads_sql, reserve_ids_sql
from audit.models import AuditChainHead, AuditEvent
from audit.services import audit_prefetched
from runs.store import inserts, rows
from runs.store.pipeline import Write, current_batch


class RowStatements:
    """``audit.services.EventStatements`` through ``runs.store.rows``: inside a batch the
    events' INSERT and the heads' upserts are held and sent with the transaction's other
    writes, and checked before its COMMIT (installed by ``RunsConfig.ready``)."""

    def fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return rows.fetch(sql, params)

    def insert(self, events: list[AuditEvent], *, returning: bool) -> None:
        inserts.insert(events, returning=returning)

    def execute(self, sql: str, params: Sequence[Any], *, row: str, error: Exception) -> None:
        table = AuditChainHead._meta.db_table
        inserts.execute(Write(sql, params, table=table, row=row, expect_one=error))


def reserve_ids_later(count: int) -> Callable[[], list[int]]:
    """Inside a pipelined batch (PostgreSQL): queue the reservation of ``count`` event ids
    (``audit.chain.reserve_ids_sql``: hold the lock of the chain they are for); returns the
    function that reads them once the batch has synced or closed.

    Raises:
        RuntimeError: no pipelined batch is open.
    """
    batch = current_batch()
    if batch is None or not batch.pipelined:
        raise RuntimeError("reserving event ids needs a pipelined batch")
    read = batch.fetch_later(reserve_ids_sql(), [count])
    return lambda: [key for (key,) in read()]


def prefetch_chains(chains: list[str], events: int) -> None:
    """Inside ``pipelined_atomic``: queue, with the block's first reads, the locked read of
    ``chains``' heads and (PostgreSQL) the reservation of ``events`` event ids, which writing
    the block's events then uses (``audit.services.audit_prefetched``). Take the chains' run
    locks first (lock order: ``runs.transitions``). Reserved ids left unused are skipped.

    Raises:
        RuntimeError: no batch is open.
    """
    batch = current_batch()
    if batch is None:
        raise RuntimeError("prefetching audit chains needs a pipelined_atomic block")
    lock = connection.features.has_select_for_update
    # The heads' locks first, then the ids: a chain's writers take ids only under its head's
    # lock, so each chain's events commit in id order (what its live stream relies on).
    read_heads = batch.fetch_later(heads_sql(len(chains), lock=lock), chains)
    read_ids = reserve_ids_later(events) if batch.pipelined else list
    audit_prefetched(chains=chains, read_heads=read_heads, read_ids=read_ids)
