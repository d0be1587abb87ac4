"""Celery tasks: thin wrappers that take ids and call one service.

The broker only carries wake-ups; every task re-reads the database and returns when there
is nothing to do, so a lost or duplicated message is harmless.
"""

from celery import shared_task

from audit.actors import Actor
from runs import services


@shared_task(name="runs.advance_run")
def advance_run(run_id: str) -> None:
    """Start or move on the run ``run_id`` (UUID text)."""
    services.run_advance(run_id=run_id, actor=Actor.worker())


@shared_task(name="runs.execute_step")
def execute_step(step_id: int) -> None:
    """Claim and execute the queued step ``step_id``."""
    services.step_execute(step_id=step_id, actor=Actor.worker())


@shared_task(name="runs.retry_step")
def retry_step(step_id: int) -> None:
    """Queue the step ``step_id`` waiting to retry, then execute it."""
    actor = Actor.worker()
    if services.step_retry_due(step_id=step_id, actor=actor):
        services.step_execute(step_id=step_id, actor=actor)


@shared_task(name="runs.sweep")
def sweep() -> dict[str, int]:
    """Periodic recovery of lost wake-ups, expired approvals and runs past deadline."""
    return services.sweep(actor=Actor.system("sweeper"))


@shared_task(name="runs.retention_purge")
def retention_purge() -> dict[str, object]:
    """Periodic retention: apply the retention policies and expire audit chains."""
    return services.retention_purge(actor=Actor.system("retention"))
