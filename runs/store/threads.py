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
from typing import Any, Generic, TypeVar

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


@dataclass(frozen=True)
class CheckpointRow:
    """A LangGraph checkpoint as ``ThreadCheckpoint`` holds it (the fields of the same
    names), with the values of the channels it changed (``blobs``)."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str
    checkpoint_type: str
    checkpoint_data: bytes
    channel_versions: dict[str, str]
    metadata: dict[str, Any]
    blobs: Sequence[BlobRow]


def checkpoint_write(session: AgentSession, checkpoint: CheckpointRow) -> None:
    """Write ``checkpoint`` of the locked ``session`` (saving its id again replaces it, but
    for its creation time) and the channel values it changed (a version on record is kept);
    inside a batch both are held and sent with the transaction's other writes."""
    session_id = _param(ThreadCheckpoint, "session", session.pk)
    namespace = checkpoint.checkpoint_ns
    if checkpoint.blobs:
        params: list[Any] = []
        for blob in checkpoint.blobs:
            data = _param(ThreadBlob, "data", blob.data)
            params += [session_id, namespace, blob.channel, blob.version, blob.type, data]
        table = ThreadBlob._meta.db_table
        sql = _blobs_sql(len(checkpoint.blobs))
        inserts.execute(Write(sql, params, table=table, insert=True))
    row = [
        session_id,
        namespace,
        checkpoint.checkpoint_id,
        checkpoint.parent_checkpoint_id,
        checkpoint.checkpoint_type,
        _param(ThreadCheckpoint, "checkpoint_data", checkpoint.checkpoint_data),
        _param(ThreadCheckpoint, "channel_versions", checkpoint.channel_versions),
        _param(ThreadCheckpoint, "metadata", checkpoint.metadata),
        _param(ThreadCheckpoint, "created_at", timezone.now()),
    ]
    inserts.execute(
        Write(
            _checkpoint_sql(),
            row,
            table=ThreadCheckpoint._meta.db_table,
            row=(session.pk, namespace, checkpoint.checkpoint_id),
        )
    )


R = TypeVar("R", ThreadBlob, ThreadWrite)


@dataclass(frozen=True)
class _Attached(Generic[R]):
    """Rows a page reads with each checkpoint, as one array a column: ``model``'s, whose
    ``read`` columns come from the arrays and whose session and ``shared`` fields are the
    checkpoint's."""

    model: type[R]
    shared: tuple[str, ...]
    read: tuple[str, ...]

    def arrays(self, alias: str) -> str:
        """The SELECT list aggregating the ``read`` columns of rows aliased ``alias``."""
        quote = rows.database().ops.quote_name
        return ", ".join(f"array_agg({alias}.{quote(c)}) AS {quote(c)}" for c in self.read)

    def of(self, checkpoint: ThreadCheckpoint, arrays: Sequence[Any]) -> list[R]:
        """The instances ``arrays`` (the ``read`` columns' arrays, None when there are no
        rows) hold for ``checkpoint``."""
        if arrays[0] is None:
            return []
        fixed = {name: getattr(checkpoint, name) for name in self.shared}
        return [
            self.model(
                session_id=checkpoint.session_id, **fixed, **dict(zip(self.read, row, strict=True))
            )
            for row in zip(*arrays, strict=True)
        ]


# A checkpoint's values (those its ``channel_versions`` name) and its pending writes.
_VALUES = _Attached(ThreadBlob, ("checkpoint_ns",), ("channel", "version", "type", "data"))
_WRITES = _Attached(
    ThreadWrite,
    ("checkpoint_ns", "checkpoint_id"),
    ("task_id", "task_path", "idx", "channel", "type", "data"),
)


@cache
def _page_sql(filters: tuple[str, ...]) -> str:
    checkpoints = rows.table_of(ThreadCheckpoint).name
    columns = ", ".join(f"c.{column}" for column in rows.column_list(ThreadCheckpoint).split(", "))
    where = " AND ".join(("s.project_id = %s", "s.external_id = %s", *filters))
    return f"""
SELECT {columns}, v.*, w.*
FROM (
    SELECT c.* FROM {checkpoints} c JOIN {rows.table_of(AgentSession).name} s
        ON s.id = c.session_id
    WHERE {where}
    ORDER BY c.checkpoint_id DESC, c.checkpoint_ns LIMIT %s
) c
LEFT JOIN LATERAL (
    SELECT {_VALUES.arrays("b")}
    FROM jsonb_each_text(c.channel_versions) AS named
    JOIN {rows.table_of(ThreadBlob).name} b ON b.session_id = c.session_id
        AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = named.key
        AND b.version = named.value
) v ON TRUE
LEFT JOIN LATERAL (
    SELECT {_WRITES.arrays("w")}
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
    values = width + len(_VALUES.read)
    page = rows.instances(ThreadCheckpoint, [row[:width] for row in found])
    return [
        (c, _VALUES.of(c, row[width:values]), _WRITES.of(c, row[values:]))
        for c, row in zip(page, found, strict=True)
    ]
