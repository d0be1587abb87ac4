"""Reads of LangGraph threads (``runs.models.threads``) for the API that ``AgentOpsSaver``
calls: a page of a thread's checkpoints, each with the channel values it names and its
pending writes, in one statement on PostgreSQL (``runs.store.threads.checkpoint_page``),
three queries elsewhere, whatever the page size."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from django.db import connection
from django.db.models import Q

from runs.models.threads import ThreadBlob, ThreadCheckpoint, ThreadWrite
from runs.store.threads import checkpoint_page

# The most checkpoints one page holds (``AgentOpsSaver.list`` asks for the next page).
MAX_PAGE: Final = 100


@dataclass(frozen=True)
class CheckpointRecord:
    """A checkpoint with the values its ``channel_versions`` name (``blobs``; a channel
    whose value is missing is left out) and its pending writes in the order LangGraph
    applies them (``langgraph.checkpoint.base.writes_sort_key``: task path, task id,
    index)."""

    checkpoint: ThreadCheckpoint
    blobs: list[ThreadBlob]
    writes: list[ThreadWrite]


def thread_checkpoints(
    *,
    project_id: int,
    thread_id: str,
    checkpoint_ns: str | None = None,
    checkpoint_id: str | None = None,
    before: str | None = None,
    metadata: dict[str, Any] | None = None,
    limit: int = MAX_PAGE,
) -> list[CheckpointRecord]:
    """The checkpoints of thread ``thread_id`` in project ``project_id``, newest (greatest
    checkpoint id) first: of namespace ``checkpoint_ns`` (None: every namespace), only
    ``checkpoint_id`` when given, only those before checkpoint id ``before`` when given,
    only those whose metadata contains ``metadata`` (JSON containment, as PostgreSQL's
    ``@>``), at most ``limit`` (1 to ``MAX_PAGE``). An unknown thread has none."""
    limit = max(1, min(limit, MAX_PAGE))
    if connection.vendor == "postgresql":
        read = checkpoint_page(
            project_id=project_id,
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            before=before,
            metadata=metadata,
            limit=limit,
        )
        return [
            CheckpointRecord(checkpoint=c, blobs=blobs, writes=_in_order(writes))
            for c, blobs, writes in read
        ]
    found = ThreadCheckpoint.objects.filter(
        session__project_id=project_id, session__external_id=thread_id
    )
    if checkpoint_ns is not None:
        found = found.filter(checkpoint_ns=checkpoint_ns)
    if checkpoint_id is not None:
        found = found.filter(checkpoint_id=checkpoint_id)
    if before is not None:
        found = found.filter(checkpoint_id__lt=before)
    if metadata:
        found = found.filter(metadata__contains=metadata)
    page = list(found.order_by("-checkpoint_id", "checkpoint_ns")[:limit])
    if not page:
        return []
    named = Q(pk__in=[])
    for checkpoint in page:
        for channel, version in checkpoint.channel_versions.items():
            named |= Q(checkpoint_ns=checkpoint.checkpoint_ns, channel=channel, version=version)
    blobs = {
        (b.checkpoint_ns, b.channel, b.version): b
        for b in ThreadBlob.objects.filter(named, session_id=page[0].session_id)
    }
    after = Q(pk__in=[])
    for checkpoint in page:
        after |= Q(checkpoint_ns=checkpoint.checkpoint_ns, checkpoint_id=checkpoint.checkpoint_id)
    writes: dict[tuple[str, str], list[ThreadWrite]] = {
        (c.checkpoint_ns, c.checkpoint_id): [] for c in page
    }
    for write in _in_order(ThreadWrite.objects.filter(after, session_id=page[0].session_id)):
        writes[(write.checkpoint_ns, write.checkpoint_id)].append(write)
    return [
        CheckpointRecord(
            checkpoint=c,
            blobs=[
                blobs[key]
                for key in ((c.checkpoint_ns, ch, v) for ch, v in c.channel_versions.items())
                if key in blobs
            ],
            writes=writes[(c.checkpoint_ns, c.checkpoint_id)],
        )
        for c in page
    ]


def _in_order(writes: Iterable[ThreadWrite]) -> list[ThreadWrite]:
    # Sorted here, not by the database, whose collation may order text otherwise.
    return sorted(writes, key=lambda w: (w.task_path, w.task_id, w.idx))
