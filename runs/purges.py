"""Retention purges as records: started from admin ("Run now"), by Celery beat or by
``manage.py purge_retention``, executed by a Celery task, one at a time, with their progress.

Two guards keep a purge from running twice at once. Starting one inserts a ``queued``
``RetentionPurge``, and a unique index admits at most one queued or running purge, so a
second start (a double click, beat at the same moment) is refused. Executing claims the
record with a conditional update (``queued → running``), so a task delivered twice runs it
once, and holds a PostgreSQL advisory lock for the whole purge, which tells a purge that runs
from one whose worker died (its record still says ``running``, the lock is free): the next
start marks such a purge failed instead of waiting for it forever.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agentops.actors import Actor, ActorKind
from agentops.errors import Conflict, InvalidInput
from audit.services import audit_system, audited_atomic
from runs.models import PURGE_OPEN, PurgeStatus, RetentionPolicy, RetentionPurge
from runs.queries import advisory_lock_release, advisory_lock_try
from runs.retention import RetentionReport, retention_purge

logger = logging.getLogger(__name__)

# The advisory lock held while a purge executes (a fixed 64-bit key derived from its name).
PURGE_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"agentops.retention_purge").digest()[:8], "big", signed=True
)
# A queued purge whose task has not started after this long is taken as lost (its message
# never reached a worker) and failed, so it no longer blocks new purges; so is a running one
# on a database without advisory locks (the embedded SQLite), where nothing else tells.
LOST_AFTER = timedelta(minutes=10)

_COUNTS = ("runs", "steps", "redacted_runs", "audit_events", "batches")


@contextmanager
def _purge_lock() -> Iterator[bool]:
    """Try to take the purge lock for this database session; yields whether it was taken
    and releases it on exit (always taken on a database without advisory locks)."""
    if connection.vendor != "postgresql":
        yield True
        return
    taken = advisory_lock_try(key=PURGE_LOCK_KEY)
    try:
        yield taken
    finally:
        if taken:
            advisory_lock_release(key=PURGE_LOCK_KEY)


def _is_lost(purge: RetentionPurge, *, lock_free: bool) -> bool:
    if purge.status == PurgeStatus.RUNNING and connection.vendor == "postgresql":
        return lock_free
    since = purge.started_at or purge.created_at
    return timezone.now() - since >= LOST_AFTER


def _fail_lost_purges(*, actor: Actor) -> None:
    """Fail open purges that nothing executes: running with the purge lock free (their
    worker died), or queued for ``LOST_AFTER`` or longer. Inside a transaction."""
    open_purges = list(RetentionPurge.objects.select_for_update().filter(status__in=PURGE_OPEN))
    if not open_purges:
        return
    with _purge_lock() as lock_free:
        pass
    for purge in open_purges:
        if not _is_lost(purge, lock_free=lock_free):
            continue
        reason = (
            "interrupted: its worker stopped"
            if purge.status == PurgeStatus.RUNNING
            else "never started: its task was lost"
        )
        _finish(purge.pk, PurgeStatus.FAILED, error=reason)
        audit_system(
            actor=actor,
            verb="retention.purge_failed",
            object_type="retention_purge",
            object_id=purge.pk,
            payload={"error": reason},
        )


def purge_start(*, actor: Actor, policy_id: int | None = None) -> RetentionPurge:
    """Record a new, queued purge of the policy ``policy_id`` (None: every enabled policy,
    then the audit chains) started by ``actor``, with a ``retention.purge_started`` event in
    the system audit chain; returns it, committed. The caller then sends its task
    (``runs.tasks.retention_purge_execute``) or calls ``purge_execute``.

    Raises:
        RetentionPolicy.DoesNotExist: no policy ``policy_id``.
        InvalidInput: the policy is disabled (enable it to run it).
        Conflict: another purge is queued or running.
    """
    policy = RetentionPolicy.objects.get(pk=policy_id) if policy_id is not None else None
    if policy is not None and not policy.enabled:
        raise InvalidInput(f"the policy {policy.name!r} is disabled: enable it to run it")
    user = actor.user if actor.kind == ActorKind.USER else None
    with audited_atomic():
        _fail_lost_purges(actor=actor)
        try:
            with transaction.atomic():
                purge = RetentionPurge.objects.create(
                    policy=policy,
                    policy_name=policy.name if policy is not None else "",
                    started_by=user,
                    started_by_name=actor.name or actor.kind,
                )
        except IntegrityError:
            raise Conflict("another retention purge is queued or running") from None
        audit_system(
            actor=actor,
            verb="retention.purge_started",
            object_type="retention_purge",
            object_id=purge.pk,
            payload={"policy": policy_id, "policy_name": purge.policy_name},
        )
    return purge


def _finish(purge_id: int, status: str, *, error: str = "", **counts: Any) -> None:
    RetentionPurge.objects.filter(pk=purge_id, status__in=PURGE_OPEN).update(
        status=status, error=error, finished_at=timezone.now(), **counts
    )


def purge_execute(
    *, purge_id: int, actor: Actor, batch_size: int | None = None
) -> RetentionPurge | None:
    """Execute the queued purge ``purge_id`` (``runs.retention.retention_purge`` as ``actor``,
    ``batch_size`` steps per transaction, default ``AGENTOPS_RETENTION_BATCH_SIZE``): claim it
    (``queued → running``), write its counts after each chunk of runs, and end it
    ``succeeded`` or ``failed`` with the error (also a ``retention.purge_failed`` audit
    event). Returns the purge read back, or None when there was nothing to do: it is not
    queued (done, or claimed by a twin delivery) or another purge holds the lock.
    """
    with _purge_lock() as taken:
        if not taken:
            return None
        claimed = RetentionPurge.objects.filter(pk=purge_id, status=PurgeStatus.QUEUED).update(
            status=PurgeStatus.RUNNING, started_at=timezone.now()
        )
        if not claimed:
            return None
        purge = RetentionPurge.objects.get(pk=purge_id)

        def progress(report: RetentionReport) -> None:
            RetentionPurge.objects.filter(pk=purge_id).update(
                **{name: getattr(report, name) for name in _COUNTS}
            )

        try:
            if purge.policy_name and purge.policy_id is None:
                raise Conflict(f"its policy {purge.policy_name!r} was deleted")
            report = retention_purge(
                actor=actor,
                batch_size=batch_size,
                policy_id=purge.policy_id,
                purge_id=purge_id,
                on_progress=progress,
            )
        except Exception as exc:
            logger.exception("retention purge %s failed", purge_id)
            error = f"{type(exc).__name__}: {exc}"
            _finish(purge_id, PurgeStatus.FAILED, error=error)
            audit_system(
                actor=actor,
                verb="retention.purge_failed",
                object_type="retention_purge",
                object_id=purge_id,
                payload={"error": error},
            )
        else:
            _finish(purge_id, PurgeStatus.SUCCEEDED, **{name: report[name] for name in _COUNTS})
    return RetentionPurge.objects.get(pk=purge_id)
