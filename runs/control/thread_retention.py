"""LangGraph threads' checkpoints deleted, copied and pruned (issue 34, item 1): the
``delete_thread``, ``copy_thread`` and ``prune`` of the SDK's ``AgentOpsSaver``.

These are the LangGraph names of what agentops calls retention and a fork: each locks the
thread's session row (``runs.transitions.lock_session``) and writes one audit event in the
session's chain, in the same transaction; the session itself (its runs, conversation and
state) is left alone (``runs.control.threads`` has the writes and the module's rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from django.db.models import Max, Model, Q

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.services import audited_atomic
from runs.control.threads import check_name, locked_open, thread_find, thread_open
from runs.models import AgentSession
from runs.models.threads import ThreadBlob, ThreadCheckpoint, ThreadWrite
from runs.transitions import lock_session, record_session_event

# LangGraph's ``prune`` strategies (``BaseCheckpointSaver.prune``): keep each namespace's
# latest checkpoint, or delete every checkpoint.
PRUNE_STRATEGIES: Final = ("keep_latest", "delete")
# Metadata keys a LangGraph ``DeltaChannel`` leaves in a checkpoint (langgraph-checkpoint's
# PostgresSaver looks for the same ones): such a thread's latest value is rebuilt from its
# older checkpoints, so keep_latest may not prune it.
DELTA_METADATA_KEYS: Final = ("counters_since_delta_snapshot", "delta_writes_versioned")


def thread_delete(*, actor: Actor, project_id: int, thread_id: str) -> int:
    """Delete every checkpoint of thread ``thread_id`` in project ``project_id`` (all
    namespaces), their pending writes and channel values; the session stays. Returns how many
    checkpoints went (0: no such thread, nothing done, no event). One audit event,
    ``session.thread_deleted``."""
    found = thread_find(project_id=project_id, thread_id=thread_id)
    if found is None:
        return 0
    with audited_atomic():
        session = lock_session(found.pk)
        deleted = _delete_all(session)
        record_session_event(actor, session, "thread_deleted", checkpoints=deleted)
    return deleted


def _delete_all(session: AgentSession) -> int:
    ThreadWrite.objects.filter(session=session).delete()
    ThreadBlob.objects.filter(session=session).delete()
    return int(ThreadCheckpoint.objects.filter(session=session).delete()[0])


def thread_copy(
    *, actor: Actor, project_id: int, source_thread_id: str, target_thread_id: str
) -> int:
    """Copy every checkpoint of thread ``source_thread_id`` (all namespaces, with their
    pending writes and channel values) to thread ``target_thread_id`` of the same project,
    opening its session if it has none: a fork of the whole thread, which the source keeps.
    Returns how many checkpoints were copied. One audit event in the target's chain,
    ``session.thread_copied``, naming the source.

    Raises:
        InvalidInput: a malformed id, or the same thread twice.
        AgentSession.DoesNotExist: no such source thread in project ``project_id``.
        Conflict: the target has checkpoints already, or its session is closed.
    """
    check_name(target_thread_id, "target_thread_id")
    if source_thread_id == target_thread_id:
        raise InvalidInput("a thread cannot be copied onto itself", field="target_thread_id")
    source = AgentSession.objects.get(project_id=project_id, external_id=source_thread_id)
    target = thread_open(actor=actor, project_id=project_id, thread_id=target_thread_id)
    with audited_atomic():
        # Sessions are locked in id order, so two copies between the same threads in
        # opposite directions wait for each other instead of deadlocking.
        for session_id in sorted([source.pk, target.pk]):
            lock_session(session_id)
        target = locked_open(target.pk)
        if ThreadCheckpoint.objects.filter(session=target).exists():
            raise Conflict(f"thread {target_thread_id!r} has checkpoints already")
        copied = _copy_rows(source, target)
        record_session_event(
            actor,
            target,
            "thread_copied",
            source_session=str(source.pk),
            source_thread_id=source_thread_id,
            checkpoints=copied,
        )
    return copied


# What a thread's copy takes of each row of the source: every column but the row's key, its
# session (the target's) and a checkpoint's creation time (the copy's), so that a column added
# to these models is copied too. Checkpoints are copied in the source's order (id).
_NOT_COPIED: Final = frozenset({"id", "session", "created_at"})
_COPIED_MODELS: Final[tuple[type[Model], ...]] = (ThreadBlob, ThreadCheckpoint, ThreadWrite)


def _copy_rows(source: AgentSession, target: AgentSession) -> int:
    """Copy every checkpoint, channel value and pending write of thread ``source`` to
    ``target`` (``_NOT_COPIED``: one INSERT per model, the source's rows read in batches);
    returns how many checkpoints were copied."""
    copied: dict[type[Model], int] = {}
    for model in _COPIED_MODELS:
        fields = [f.attname for f in model._meta.concrete_fields if f.name not in _NOT_COPIED]
        found = model._default_manager.filter(session=source).order_by("pk").values_list(*fields)
        made = model._default_manager.bulk_create(
            model(session=target, **dict(zip(fields, row, strict=True))) for row in found.iterator()
        )
        copied[model] = len(made)
    return copied[ThreadCheckpoint]


def thread_prune(*, actor: Actor, project_id: int, thread_ids: Sequence[str], strategy: str) -> int:
    """Prune the checkpoints of ``thread_ids`` in project ``project_id`` (unknown ones are skipped):
    ``keep_latest`` keeps the newest checkpoint of each namespace with its pending writes
    and the channel values it names, ``delete`` deletes them all. Returns how many
    checkpoints went. One audit event per thread pruned, ``session.checkpoints_pruned``.

    Raises:
        InvalidInput: an unknown ``strategy``.
        Conflict: ``keep_latest`` of a thread that uses a LangGraph ``DeltaChannel`` (its
            values are rebuilt from older checkpoints); nothing is pruned then.
    """
    if strategy not in PRUNE_STRATEGIES:
        raise InvalidInput(
            f"strategy must be one of {', '.join(PRUNE_STRATEGIES)}", field="strategy"
        )
    sessions = AgentSession.objects.filter(project_id=project_id, external_id__in=list(thread_ids))
    deleted = 0
    with audited_atomic():
        for session in sessions.order_by("pk"):
            lock_session(session.pk)
            deleted += _prune_one(actor, session, strategy)
    return deleted


def _prune_one(actor: Actor, session: AgentSession, strategy: str) -> int:
    checkpoints = ThreadCheckpoint.objects.filter(session=session)
    if strategy == "delete":
        deleted = _delete_all(session)
    else:
        for key in DELTA_METADATA_KEYS:
            if checkpoints.filter(metadata__has_key=key).exists():
                raise Conflict(
                    f"keep_latest cannot prune thread {session.external_id!r}: it uses a "
                    "DeltaChannel"
                )
        newest = (
            checkpoints.order_by()
            .values("checkpoint_ns")
            .annotate(latest=Max("checkpoint_id"))
            .values_list("checkpoint_ns", "latest")
        )
        keep = Q(pk__in=[])
        for ns, checkpoint_id in newest:
            keep |= Q(checkpoint_ns=ns, checkpoint_id=checkpoint_id)
        named = Q(pk__in=[])
        for ns, versions in checkpoints.filter(keep).values_list(
            "checkpoint_ns", "channel_versions"
        ):
            for channel, version in versions.items():
                named |= Q(checkpoint_ns=ns, channel=channel, version=version)
        ThreadWrite.objects.filter(session=session).exclude(keep).delete()
        deleted = int(checkpoints.exclude(keep).delete()[0])
        ThreadBlob.objects.filter(session=session).exclude(named).delete()
    record_session_event(
        actor, session, "checkpoints_pruned", strategy=strategy, checkpoints=deleted
    )
    return deleted
