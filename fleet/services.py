"""Changes to the task history: an operator re-sends a failed task; retention deletes old rows."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentops import celery_app
from agentops.actors import Actor
from agentops.errors import Conflict
from audit.services import audit_record, audit_system
from fleet.models import TaskRecord, TaskState
from runs.models import Run


def task_resend(*, record_id: int, actor: Actor) -> str:
    """Send the failed task of the history row ``record_id`` again, with the arguments it was
    sent with, and return the new message's task id.

    The caller has checked that ``actor`` may (``runs.resume_run`` in the row's project;
    superusers for work of no run). The audit event ``task.resent`` (payload: ``task``,
    ``args``, ``kwargs``, ``new_task_id``) goes to the run's chain when the task concerned a
    run that still exists (its row lock held, as the chain requires), else to the ``system``
    chain. The message is sent after commit: the broker carries a wake-up, and the database
    state decides what it does (a step that is no longer queued is left alone).

    Raises:
        TaskRecord.DoesNotExist: no such row.
        Conflict: the task did not fail, its arguments were not kept, or it was re-sent
            already (as ``resent_task_id``).
    """
    new_id = str(uuid.uuid4())
    with transaction.atomic():
        record = TaskRecord.objects.select_for_update().get(pk=record_id)
        if record.state != TaskState.FAILURE:
            raise Conflict(f"only a failed task can be re-sent; this one ended {record.state}")
        if record.call is None:
            raise Conflict(
                "its arguments were not kept (too long or not JSON): it cannot be re-sent"
            )
        if record.resent_task_id:
            raise Conflict(f"it was re-sent already, as task {record.resent_task_id}")
        record.resent_task_id = new_id
        record.save(update_fields=["resent_task_id"])
        args, kwargs = list(record.call["args"]), dict(record.call["kwargs"])
        payload: dict[str, Any] = {
            "task": record.name,
            "task_id": record.task_id,
            "args": args,
            "kwargs": kwargs,
            "new_task_id": new_id,
        }
        run = None
        if record.run_id is not None:
            run = Run.objects.select_for_update().filter(pk=record.run_id).first()
        if run is not None:
            audit_record(
                actor=actor,
                verb="task.resent",
                object_type="task",
                object_id=record.task_id,
                run_id=run.pk,
                project_id=run.project_id,
                payload=payload,
            )
        else:
            audit_system(
                actor=actor,
                verb="task.resent",
                object_type="task",
                object_id=record.task_id,
                payload=payload,
            )
        name = record.name
        transaction.on_commit(
            lambda: celery_app.send_task(name, args=args, kwargs=kwargs, task_id=new_id)
        )
    return new_id


def task_history_purge(*, batch_size: int | None = None) -> int:
    """Delete history rows that finished more than ``AGENTOPS_TASK_HISTORY_DAYS`` days ago, in
    batches of ``batch_size`` rows (default ``AGENTOPS_RETENTION_BATCH_SIZE``), each its own
    transaction; returns how many were deleted."""
    size = batch_size or settings.AGENTOPS_RETENTION_BATCH_SIZE
    cutoff = timezone.now() - timedelta(days=settings.AGENTOPS_TASK_HISTORY_DAYS)
    deleted = 0
    while True:
        ids = list(
            TaskRecord.objects.filter(finished_at__lt=cutoff).values_list("pk", flat=True)[:size]
        )
        if not ids:
            return deleted
        deleted += TaskRecord.objects.filter(pk__in=ids).delete()[0]
