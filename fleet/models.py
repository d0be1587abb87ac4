"""The task history: one row per finished execution of a Celery task on a worker."""

from __future__ import annotations

from django.db import models


class TaskState(models.TextChoices):
    """How a task execution ended, in Celery's terms (``celery.states``)."""

    SUCCESS = "success", "Succeeded"
    FAILURE = "failure", "Failed"
    RETRY = "retry", "Retry scheduled"


class TaskRecord(models.Model):
    """One finished execution of a Celery task by a worker (``fleet.receivers``).

    ``task_id`` is Celery's id (an automatic retry keeps it, so one id may have several rows);
    ``name`` the task's registered name (``runs.execute_step``); ``call`` the arguments it was
    sent with, ``{"args": [...], "kwargs": {...}}``, kept when they are JSON and at most
    ``fleet.receivers.MAX_CALL_BYTES`` long (else None: it cannot be re-sent), and
    ``args_summary`` a short text of them for display. ``run_id`` and ``project_id`` name the
    run the task concerned (its argument is a run or step id), copied by value so history
    survives the run's deletion; None for work of no run (the sweeper, retention).
    ``worker`` is the worker's node name, ``queue`` the queue it came from; ``started_at`` and
    ``finished_at`` are wall-clock times, ``runtime_ms`` the execution time in ms;
    ``retries`` how many times Celery had retried it before; ``exception`` is ``"Type:
    message"`` and ``traceback`` Celery's traceback text (both empty on success).
    ``resent_task_id`` is the id of the copy an operator re-sent (``fleet.services``), empty
    until then. Rows older than ``AGENTOPS_TASK_HISTORY_DAYS`` are deleted by beat.
    """

    task_id = models.CharField(max_length=255, db_index=True)
    name = models.CharField(max_length=255)
    call = models.JSONField(null=True, blank=True)
    args_summary = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=16, choices=TaskState.choices)
    run_id = models.UUIDField(null=True, blank=True, db_index=True)
    project_id = models.BigIntegerField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True)
    queue = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    runtime_ms = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    exception = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    resent_task_id = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-finished_at", "-id"]
        indexes = [
            models.Index(fields=["-finished_at"], name="taskrecord_finished_idx"),
            models.Index(fields=["state", "name"], name="taskrecord_state_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.task_id} ({self.state})"

    @property
    def resendable(self) -> bool:
        """Whether an operator may re-send it: it failed, its arguments were kept and it was
        not re-sent already."""
        return self.state == TaskState.FAILURE and self.call is not None and not self.resent_task_id
