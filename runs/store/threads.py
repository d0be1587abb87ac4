"""The statements of a LangGraph thread's ``put`` and ``get_tuple`` (``AgentOpsSaver``'s two
hot calls): a checkpoint saved in a pipelined transaction, a page of checkpoints read in one
statement.

Through the ORM a ``put`` was nine statements, each its own round trip (the session's lock,
the values, the checkpoint, the audit chain's head, the event, the head's upsert, BEGIN and
COMMIT), and a ``get_tuple`` three queries after the session's lookup. Here a ``put`` locks
the session and reads the chain's head and an event id in one round trip
(``lock_open_session``), holds its writes (``checkpoint_write``), which go with the audit
event's as one statement when the batch closes; a ``get_tuple`` is one statement on
PostgreSQL (``checkpoint_page``). Figures: ``benchmarks/README.md``, "langgraph".
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.utils import timezone

from audit.models import session_chain
from runs.models import AgentSession
from runs.models.threads import ThreadBlob, ThreadCheckpoint, ThreadWrite
from runs.store import inserts, rows
from runs.store.audit import prefetch_chains
from runs.store.pipeline import Write, current_batch


@dataclass(frozen=True)
class BlobRow:
    """The value of ``channel`` at ``version`` as LangGraph's serializer made it."""

    channel: str
    version: str
    type: str
    data: bytes


def lock_open_session(session_id: uuid.UUID, events: int) -> AgentSession | None:
    """Inside ``runs.store.transaction.pipelined_atomic``: the session row locked, with its
    audit chain's head (locked) and ``events`` reserved event ids, in one round trip; None
    when the session is gone.

    Raises:
        RuntimeError: no batch is open.
    """
    batch = current_batch()
    if batch is None:
        raise RuntimeError("lock_open_session needs a pipelined_atomic block")
    read = rows.select_later(AgentSession, "id = %s", [session_id], lock=True)
    prefetch_chains([session_chain(session_id)], events)
    batch.sync()
    found = read()
    return found[0] if found else None


def _param(model: type[Any], name: str, value: Any) -> Any:
    return model._meta.get_field(name).get_db_prep_save(value, rows.database())


@cache
def _blobs_sql(count: int) -> str:
    table = rows.table_of(ThreadBlob).name
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * count)
    # A version is written once: the same version again is the same value.
    return (
        f'INSERT INTO {table} (session_id, checkpoint_ns, channel, version, "type", "data") '  # noqa: S608
        f"VALUES {values} ON CONFLICT DO NOTHING"
    )


def _checkpoint_sql() -> str:
    table = rows.table_of(ThreadCheckpoint).name
    changed = ("parent_checkpoint_id", "checkpoint_type", "checkpoint_data", "channel_versions")
    sets = ", ".join(f"{name} = EXCLUDED.{name}" for name in (*changed, "metadata"))
    return (
        f"INSERT INTO {table} (session_id, checkpoint_ns, checkpoint_id, {', '.join(changed)}, "  # noqa: S608
        "metadata, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        f"ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE SET {sets}"
    )


def checkpoint_write(
    session: AgentSession,
    *,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint_type: str,
    checkpoint_data: bytes,
    channel_versions: dict[str, str],
    metadata: dict[str, Any],
    blobs: Sequence[BlobRow],
) -> None:
    """Write a checkpoint of the locked ``session`` (saving its id again replaces it, but for
    its creation time) and the channel values it changed (a version on record is kept); inside
    a batch both are held and sent with the transaction's other writes."""
    session_id = _param(ThreadCheckpoint, "session", session.pk)
    if blobs:
        params: list[Any] = []
        for blob in blobs:
            data = _param(ThreadBlob, "data", blob.data)
            params += [session_id, checkpoint_ns, blob.channel, blob.version, blob.type, data]
        table = ThreadBlob._meta.db_table
        inserts.execute(Write(_blobs_sql(len(blobs)), params, table=table, insert=True))
    checkpoint = [
        session_id,
        checkpoint_ns,
        checkpoint_id,
        parent_checkpoint_id,
        checkpoint_type,
        _param(ThreadCheckpoint, "checkpoint_data", checkpoint_data),
        _param(ThreadCheckpoint, "channel_versions", channel_versions),
        _param(ThreadCheckpoint, "metadata", metadata),
        _param(ThreadCheckpoint, "created_at", timezone.now()),
    ]
    inserts.execute(
        Write(
            _checkpoint_sql(),
            checkpoint,
            table=ThreadCheckpoint._meta.db_table,
            row=(session.pk, checkpoint_ns, checkpoint_id),
        )
    )


@cache
def _page_sql(filters: tuple[str, ...]) -> str:
    checkpoints = rows.table_of(ThreadCheckpoint).name
    columns = ", ".join(f"c.{column}" for column in rows.column_list(ThreadCheckpoint).split(", "))
    where = " AND ".join(("s.project_id = %s", "s.external_id = %s", *filters))
    return f"""
SELECT {columns},
    v.channels, v.versions, v.types, v.datas,
    w.task_ids, w.task_paths, w.idxs, w.channels, w.types, w.datas
FROM (
    SELECT c.* FROM {checkpoints} c JOIN {rows.table_of(AgentSession).name} s
        ON s.id = c.session_id
    WHERE {where}
    ORDER BY c.checkpoint_id DESC, c.checkpoint_ns LIMIT %s
) c
LEFT JOIN LATERAL (
    SELECT array_agg(b.channel) AS channels, array_agg(b.version) AS versions,
        array_agg(b."type") AS types, array_agg(b."data") AS datas
    FROM jsonb_each_text(c.channel_versions) AS named
    JOIN {rows.table_of(ThreadBlob).name} b ON b.session_id = c.session_id
        AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = named.key
        AND b.version = named.value
) v ON TRUE
LEFT JOIN LATERAL (
    SELECT array_agg(w.task_id) AS task_ids, array_agg(w.task_path) AS task_paths,
        array_agg(w.idx) AS idxs, array_agg(w.channel) AS channels,
        array_agg(w."type") AS types, array_agg(w."data") AS datas
    FROM {rows.table_of(ThreadWrite).name} w
    WHERE w.session_id = c.session_id AND w.checkpoint_ns = c.checkpoint_ns
        AND w.checkpoint_id = c.checkpoint_id
) w ON TRUE
ORDER BY c.checkpoint_id DESC, c.checkpoint_ns"""  # noqa: S608


def checkpoint_page(
    *,
    project_id: int,
    thread_id: str,
    checkpoint_ns: str | None,
    checkpoint_id: str | None,
    before: str | None,
    metadata: dict[str, Any] | None,
    limit: int,
) -> list[tuple[ThreadCheckpoint, list[ThreadBlob], list[ThreadWrite]]]:
    """PostgreSQL, one statement: the checkpoints of thread ``thread_id`` in project
    ``project_id`` as ``runs.thread_selectors.thread_checkpoints`` selects them (its
    arguments; ``limit`` already bounded), newest first, each with the values its
    ``channel_versions`` name (those on record) and its pending writes (unordered)."""
    filters: list[str] = []
    params: list[Any] = [project_id, thread_id]
    for condition, value in (
        ("c.checkpoint_ns = %s", checkpoint_ns),
        ("c.checkpoint_id = %s", checkpoint_id),
        ("c.checkpoint_id < %s", before),
    ):
        if value is not None:
            filters.append(condition)
            params.append(value)
    if metadata:
        filters.append("c.metadata @> %s")
        params.append(_param(ThreadCheckpoint, "metadata", metadata))
    found = rows.fetch(_page_sql(tuple(filters)), [*params, limit])
    width = rows.width(ThreadCheckpoint)
    page = rows.instances(ThreadCheckpoint, [row[:width] for row in found])
    return [
        (c, _blobs(c, row[width : width + 4]), _writes(c, row[width + 4 :]))
        for c, row in zip(page, found, strict=True)
    ]


def _blobs(checkpoint: ThreadCheckpoint, columns: Sequence[Any]) -> list[ThreadBlob]:
    if columns[0] is None:
        return []
    return [
        ThreadBlob(
            session_id=checkpoint.session_id,
            checkpoint_ns=checkpoint.checkpoint_ns,
            channel=channel,
            version=version,
            type=type_,
            data=data,
        )
        for channel, version, type_, data in zip(*columns, strict=True)
    ]


def _writes(checkpoint: ThreadCheckpoint, columns: Sequence[Any]) -> list[ThreadWrite]:
    if columns[0] is None:
        return []
    return [
        ThreadWrite(
            session_id=checkpoint.session_id,
            checkpoint_ns=checkpoint.checkpoint_ns,
            checkpoint_id=checkpoint.checkpoint_id,
            task_id=task_id,
            task_path=task_path,
            idx=idx,
            channel=channel,
            type=type_,
            data=data,
        )
        for task_id, task_path, idx, channel, type_, data in zip(*columns, strict=True)
    ]
