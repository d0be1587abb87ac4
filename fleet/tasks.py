"""Celery tasks of the control room: thin wrappers around ``fleet.services``."""

from celery import shared_task

from fleet import services
from runs.tasks import DatabaseTask


@shared_task(name="fleet.purge_task_history", base=DatabaseTask)
def purge_task_history() -> int:
    """Periodic retention of the task history (``AGENTOPS_TASK_HISTORY_DAYS``); returns the
    rows deleted."""
    return services.task_history_purge()
