"""Celery tasks of the control room: thin wrappers around ``fleet.services``."""

from celery import shared_task
from django.conf import settings

from fleet import broker, services
from runs.tasks import DatabaseTask


@shared_task(name="fleet.purge_task_history", base=DatabaseTask)
def purge_task_history() -> int:
    """Periodic retention of the task history (``AGENTOPS_TASK_HISTORY_DAYS``); returns the
    rows deleted."""
    return services.task_history_purge()


@shared_task(name="fleet.refresh_workers_report", ignore_result=True)
def refresh_workers_report() -> None:
    """Ask the workers (``AGENTOPS_INSPECT_TIMEOUT_SECONDS`` per question) and keep their
    answer as the report the workers page renders (``fleet.broker.workers_report_refresh``)."""
    broker.workers_report_refresh(timeout=settings.AGENTOPS_INSPECT_TIMEOUT_SECONDS)
