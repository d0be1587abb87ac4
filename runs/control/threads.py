"""LangGraph threads (issue 34, item 1): the writes of the SDK's ``AgentOpsSaver``.

A thread is the session (``AgentSession``) of the project whose ``external_id`` is the
thread id, opened (``runs.control.sessions.session_create``, audited) by its first
checkpoint. Its checkpoints, channel values and pending writes are ``runs.models.threads``
rows. Every change locks the session row (``runs.transitions.lock_session``: one writer of a
thread at a time) and writes one audit event in the session's chain (``session.<event>``) in
the same transaction. Deleting a thread's checkpoints, pruning and copying them are the
LangGraph names of what agentops calls retention and a fork; the session itself (its runs,
conversation and state) is left alone, and goes with session retention
(``runs.retention``), which takes its checkpoints with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from agentops.storable import require_storable
from audit.services import audited_atomic
from projects.models import Project
from runs.control.sessions import session_create
from runs.models import AgentSession
from runs.models.threads import MAX_NAME_CHARS, ThreadWrite
from runs.store.threads import BlobRow, CheckpointRow, checkpoint_write, lock_open_session
from runs.store.transaction import pipelined_atomic
from runs.transitions import lock_session, record_session_event

# LangGraph's special write channels and their fixed indexes (``WRITES_IDX_MAP``): a write
# of these replaces an earlier one of the same task, any other write is kept as first given.
SPECIAL_WRITE_IDX: Final = frozenset({-1, -2, -3, -4})


@dataclass(frozen=True)
class Serialized:
    """A value as LangGraph's serializer made it (``dumps_typed``): its type name (at most
    32 characters) and bytes."""

    type: str
    data: bytes


@dataclass(frozen=True)
class Blob:
    """The value (``value``) of ``channel`` at ``version``, written by a checkpoint."""

    channel: str
    version: str
    value: Serialized


@dataclass(frozen=True)
class PendingWrite:
    """The ``idx``-th write of a task to ``channel``."""

    idx: int
    channel: str
    value: Serialized


def check_name(value: Any, field: str, *, blank: bool = False) -> str:
    """A thread id, namespace, checkpoint id, channel or version: a string of 1 (0 when
    ``blank``) to ``MAX_NAME_CHARS`` characters PostgreSQL can store.

    Raises:
        InvalidInput: it is not.
    """
    if not isinstance(value, str) or not (value or blank):
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    require_storable(value, field=field, max_length=MAX_NAME_CHARS)
    return value


def thread_find(*, project_id: int, thread_id: str) -> AgentSession | None:
    """The session of thread ``thread_id`` in project ``project_id``, or None."""
    return AgentSession.objects.filter(project_id=project_id, external_id=thread_id).first()


def thread_open(*, actor: Actor, project_id: int, thread_id: str) -> AgentSession:
    found = thread_find(project_id=project_id, thread_id=thread_id)
    if found is not None:
        return found
    try:
        return session_create(
            actor=actor,
            project=Project.objects.get(pk=project_id),
            external_id=thread_id,
            metadata={"langgraph": True},
        )
    except Conflict:
        # Another saver opened it meanwhile: the unique constraint chose one.
        return AgentSession.objects.get(project_id=project_id, external_id=thread_id)


def locked_open(session_id: Any) -> AgentSession:
    session = lock_session(session_id)
    if not session.is_open:
        raise Conflict("the thread's session is closed: it takes no more checkpoints")
    return session


def checkpoint_put(
    *,
    actor: Actor,
    project_id: int,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint: Serialized,
    channel_versions: dict[str, str],
    metadata: dict[str, Any],
    blobs: Sequence[Blob],
) -> None:
    """Save a LangGraph checkpoint of thread ``thread_id`` (opening its session in project
    ``project_id`` if it has none; the caller checked the actor may add runs and drive them
    there). ``checkpoint`` is the serialized checkpoint without its channel values,
    ``channel_versions`` (channel → version) names the values it holds, and ``blobs`` are
    the values it changed (the others are kept from the checkpoints that wrote them);
    ``metadata`` is JSON. Saving a checkpoint id again replaces it (its pending writes
    stay). One audit event, ``session.checkpoint_saved``. Its transaction is pipelined
    (``runs.store.threads``): BEGIN, one round trip for the locks, one for the writes and the
    event, COMMIT; the session's lookup before it only for the first checkpoint this process
    saves in the thread (``_sessions``).

    Raises:
        InvalidInput: a malformed name, ``channel_versions`` or ``metadata``.
        Conflict: the thread's session is closed.
        AgentSession.DoesNotExist: the session was deleted between its lookup and its lock.
    """
    for field, value in (("thread_id", thread_id), ("checkpoint_id", checkpoint_id)):
        check_name(value, field)
    check_name(checkpoint_ns, "checkpoint_ns", blank=True)
    check_name(parent_checkpoint_id, "parent_checkpoint_id", blank=True)
    for channel, version in channel_versions.items():
        check_name(channel, "channel_versions")
        check_name(version, f"channel_versions.{channel}")
    require_storable(metadata, field="metadata")
    for blob in blobs:
        check_name(blob.channel, "blobs.channel")
        check_name(blob.version, "blobs.version")
    row = CheckpointRow(
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent_checkpoint_id,
        checkpoint_type=checkpoint.type,
        checkpoint_data=checkpoint.data,
        channel_versions=channel_versions,
        metadata=metadata,
        blobs=[BlobRow(b.channel, b.version, b.value.type, b.value.data) for b in blobs],
    )
    key = (project_id, thread_id)
    known = _sessions.get(key)
    if known is None or not _save(actor, row, known, key):
        _sessions.pop(key, None)
        session = thread_open(actor=actor, project_id=project_id, thread_id=thread_id)
        if not _save(actor, row, session.pk, key):
            raise AgentSession.DoesNotExist(f"thread {thread_id!r} lost its session")
        known = session.pk
    _remember(key, known)


# (project id, thread id) -> the id of the thread's session, as this process last saved a
# checkpoint in it, so that the next checkpoint skips the session's lookup (a round trip and
# the ORM's query). A session's id never changes; the locked read of the next checkpoint's
# transaction checks the session is still the thread's, and looks it up again if not.
_sessions: dict[tuple[int, str], uuid.UUID] = {}
_REMEMBERED = 10_000


def _remember(key: tuple[int, str], session_id: uuid.UUID) -> None:
    if key not in _sessions and len(_sessions) >= _REMEMBERED:
        del _sessions[next(iter(_sessions))]
    _sessions[key] = session_id


def _save(
    actor: Actor, checkpoint: CheckpointRow, session_id: uuid.UUID, thread: tuple[int, str]
) -> bool:
    """Save ``checkpoint`` (``checkpoint_put``'s) in session ``session_id``, by ``actor``, in
    one pipelined transaction; False (nothing saved) when that session is no longer
    ``thread`` (project id, thread id).

    Raises:
        Conflict: the session is closed.
    """
    with pipelined_atomic():
        locked = lock_open_session(session_id, events=1)
        if locked is None or (locked.project_id, locked.external_id) != thread:
            return False
        if not locked.is_open:
            raise Conflict("the thread's session is closed: it takes no more checkpoints")
        checkpoint_write(locked, checkpoint)
        record_session_event(
            actor,
            locked,
            "checkpoint_saved",
            checkpoint_ns=checkpoint.checkpoint_ns,
            checkpoint_id=checkpoint.checkpoint_id,
            parent_checkpoint_id=checkpoint.parent_checkpoint_id,
            step=checkpoint.metadata.get("step"),
            source=checkpoint.metadata.get("source"),
            channels=sorted(blob.channel for blob in checkpoint.blobs),
        )
    return True


def checkpoint_writes_put(
    *,
    actor: Actor,
    project_id: int,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[PendingWrite],
) -> int:
    """Save the pending writes of task ``task_id`` (at ``task_path``) after checkpoint
    ``checkpoint_id`` of thread ``thread_id`` (opening its session if it has none: LangGraph
    may save the writes before the checkpoint): a write whose (task, idx) is on record is
    kept as it was, except when every write is to a special channel (negative ``idx``:
    error, interrupt...), which replaces it (as LangGraph's own savers do). Returns how
    many writes were given. One audit event, ``session.checkpoint_writes_saved``.

    Raises:
        InvalidInput: a malformed name.
        Conflict: the thread's session is closed.
    """
    check_name(thread_id, "thread_id")
    check_name(checkpoint_ns, "checkpoint_ns", blank=True)
    check_name(checkpoint_id, "checkpoint_id")
    check_name(task_id, "task_id")
    for write in writes:
        check_name(write.channel, "writes.channel")
    require_storable(task_path, field="task_path")
    session = thread_open(actor=actor, project_id=project_id, thread_id=thread_id)
    with audited_atomic():
        session = locked_open(session.pk)
        rows = [
            ThreadWrite(
                session=session,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
                task_id=task_id,
                task_path=task_path,
                idx=write.idx,
                channel=write.channel,
                type=write.value.type,
                data=write.value.data,
            )
            for write in writes
        ]
        if writes and all(write.idx in SPECIAL_WRITE_IDX for write in writes):
            ThreadWrite.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["session", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                update_fields=["task_path", "channel", "type", "data"],
            )
        else:
            ThreadWrite.objects.bulk_create(rows, ignore_conflicts=True)
        record_session_event(
            actor,
            session,
            "checkpoint_writes_saved",
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
            channels=[write.channel for write in writes],
        )
    return len(writes)
