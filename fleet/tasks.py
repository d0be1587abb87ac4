"""Celery tasks of the control room: thin wrappers around ``fleet.services`` and
``fleet.traces``."""

import uuid

from celery import Task, shared_task
from django.conf import settings

from agentops.celery import send_or_drop
from audit.models import AuditEvent
from fleet import broker, services, traces
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


@shared_task(
    name="fleet.export_run_trace",
    bind=True,
    base=DatabaseTask,
    max_retries=settings.AGENTOPS_OTEL_EXPORT_RETRIES,
    ignore_result=True,
)
def export_run_trace(self: Task, run_id: str) -> int:
    """Export the trace of the run ``run_id`` (``fleet.traces.run_trace_export``); a collector
    that did not take it is tried again after ``fleet.traces.retry_delay`` seconds, up to
    ``AGENTOPS_OTEL_EXPORT_RETRIES`` times. Returns the spans sent."""
    try:
        return traces.run_trace_export(run_id=uuid.UUID(run_id))
    except traces.ExportFailed as exc:
        raise self.retry(exc=exc, countdown=traces.retry_delay(self.request.retries)) from exc


def export_finished_runs(events: list[AuditEvent]) -> None:
    """After a commit (``audit.services.on_events_committed``, installed by
    ``FleetConfig.ready`` when the export is on): send an export of each run ``events`` say
    ended. While the broker cannot be reached the export is dropped (logged once per outage;
    ``manage.py export_traces`` sends it again)."""
    for run_id in traces.finished_runs(events):
        send_or_drop(export_run_trace, (str(run_id),))
