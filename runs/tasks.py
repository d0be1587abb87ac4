"""Celery tasks: thin wrappers that take ids and call one service.

The broker only carries wake-ups; every task re-reads the database and returns when there
is nothing to do, so a lost or duplicated message is harmless. A task that loses its database
connection (a restarted or terminated server connection) is retried shortly, on a fresh
connection (``agentops.celery.close_broken_connections``), instead of waiting for the sweeper.
"""

import uuid

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError

from agentops.actors import Actor
from runs import recovery, retention
from runs.executor import entry


class DatabaseTask(Task):
    """A task retried on a lost database connection: up to 5 times, after about 1, 2, 4, 8,
    16 s (jittered)."""

    autoretry_for = (OperationalError, InterfaceError)
    retry_backoff = 1
    retry_backoff_max = 30
    max_retries = 5


@shared_task(name="runs.advance_run", base=DatabaseTask)
def advance_run(run_id: str) -> None:
    """Start or move on the run ``run_id`` (UUID text), executing the step it queues."""
    entry.run_advance(run_id=run_id, actor=Actor.worker(), execute=True)


@shared_task(name="runs.execute_step", base=DatabaseTask)
def execute_step(step_id: int) -> None:
    """Claim and execute the queued step ``step_id``."""
    entry.step_execute(step_id=step_id, actor=Actor.worker())


@shared_task(name="runs.retry_step", base=DatabaseTask)
def retry_step(step_id: int) -> None:
    """Queue the step ``step_id`` waiting to retry, then execute it."""
    actor = Actor.worker()
    if entry.step_retry_due(step_id=step_id, actor=actor):
        entry.step_execute(step_id=step_id, actor=actor)


@shared_task(name="runs.sweep", base=DatabaseTask)
def sweep() -> dict[str, int]:
    """Periodic recovery of lost wake-ups, expired approvals and runs past deadline."""
    return recovery.sweep(actor=Actor.system("sweeper"))


@shared_task(name="runs.retention_purge", base=DatabaseTask)
def retention_purge() -> dict[str, object]:
    """Periodic retention: apply the retention policies and expire audit chains."""
    return retention.retention_purge(actor=Actor.system("retention"))


class CeleryWakeups:
    """Sends the executor's wake-ups (``runs.wakeups``) as these tasks; installed by
    ``RunsConfig.ready``."""

    def execute_step(self, step_id: int) -> None:
        execute_step.delay(step_id)

    def advance_run(self, run_id: uuid.UUID) -> None:
        advance_run.delay(str(run_id))

    def retry_step(self, step_id: int, delay: float) -> None:
        retry_step.apply_async((step_id,), countdown=delay)
