"""Retention: deleting or redacting finished runs that their policies let expire, and the
audit chains that outlived their runs.

Each app deletes its own rows: this module deletes those of runs (steps, attempts, checkpoints,
ledger rows, the runs), other apps' rows that hang off them through the ``DependentRows`` they
register at start-up, and audit events through ``audit.services.audit_purge_chains``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agentops.actors import Actor
from audit.models import AuditEvent
from audit.selectors import audit_chains_expired
from audit.services import audit_purge_chains, audit_record, audited_atomic
from runs.models import (
    Checkpoint,
    RetentionAction,
    RetentionPolicy,
    Run,
    Step,
    StepAttempt,
    ToolCall,
)

# Runs handled per chunk.
_RETENTION_RUN_CHUNK = 500
# A batch of steps of the given runs, locked: what one retention transaction deletes.
_STEP_BATCH = "SELECT id FROM runs_step WHERE run_id = ANY(%s) LIMIT %s FOR UPDATE"
# The steps of a batch and the rows of this app hanging off them, in one statement: the
# statements of a WITH share a snapshot, and Django's foreign keys are checked at commit
# (DEFERRABLE INITIALLY DEFERRED), so children and parents may go together.
_DELETE_STEPS = """
WITH checkpoints AS (DELETE FROM runs_checkpoint WHERE step_id = ANY(%(ids)s)),
attempts AS (DELETE FROM runs_stepattempt WHERE step_id = ANY(%(ids)s)),
calls AS (DELETE FROM runs_toolcall WHERE step_id = ANY(%(ids)s))
DELETE FROM runs_step WHERE id = ANY(%(ids)s)
"""


class DependentRows(Protocol):
    """Another app's rows that hang off runs and steps (an approval request and its
    decisions), deleted by that app's own code when retention deletes what they hang off.
    Registered at start-up (``register_dependent_rows``); each method runs inside the
    retention transaction that deletes the steps or runs."""

    def delete_for_steps(self, step_ids: list[int]) -> None:
        """Delete the rows that hang off these steps."""

    def delete_for_runs(self, run_ids: list[uuid.UUID]) -> None:
        """Delete the rows that hang off these runs (their steps are already gone)."""


_dependents: list[DependentRows] = []


def register_dependent_rows(dependent: DependentRows) -> None:
    """Have retention delete ``dependent``'s rows with the steps and runs they hang off (at
    start-up; registering the same object twice has no effect)."""
    if dependent not in _dependents:
        _dependents.append(dependent)


@dataclass
class RetentionReport:
    """What one purge did (or, with ``dry_run``, would do): counts of runs deleted and redacted,
    steps deleted, audit events deleted; ``batches`` transactions, the longest in ms."""

    dry_run: bool
    runs: int = 0
    steps: int = 0
    redacted_runs: int = 0
    audit_events: int = 0
    batches: int = 0
    longest_batch_ms: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _timed_batch(report: RetentionReport, started: float) -> None:
    report.batches += 1
    report.longest_batch_ms = max(report.longest_batch_ms, (time.monotonic() - started) * 1000)


def _delete_runs(run_ids: list[uuid.UUID], batch_size: int, report: RetentionReport) -> None:
    """Delete runs and all their rows, at most ``batch_size`` steps per transaction."""
    if connection.vendor != "postgresql":
        # The embedded SQLite default: Django's cascade, in one transaction per chunk.
        started = time.monotonic()
        with transaction.atomic():
            report.steps += Step.objects.filter(run_id__in=run_ids).count()
            report.runs += Run.objects.filter(pk__in=run_ids).delete()[1].get("runs.Run", 0)
        _timed_batch(report, started)
        return
    while True:
        started = time.monotonic()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_STEP_BATCH, [run_ids, batch_size])
            step_ids = [row[0] for row in cursor.fetchall()]
            if step_ids:
                for dependent in _dependents:
                    dependent.delete_for_steps(step_ids)
                cursor.execute(_DELETE_STEPS, {"ids": step_ids})
        _timed_batch(report, started)
        report.steps += len(step_ids)
        if len(step_ids) < batch_size:
            break
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        for dependent in _dependents:
            dependent.delete_for_runs(run_ids)
        cursor.execute("DELETE FROM runs_modelcall WHERE run_id = ANY(%s)", [run_ids])
        cursor.execute("DELETE FROM runs_run WHERE id = ANY(%s)", [run_ids])
        report.runs += cursor.rowcount
    _timed_batch(report, started)


def _redact_runs(run_ids: list[uuid.UUID], now: Any, report: RetentionReport) -> None:
    """Blank the data of runs (kept as rows, statuses and timings) in one transaction."""
    started = time.monotonic()
    with transaction.atomic():
        Run.objects.filter(pk__in=run_ids).update(
            input={}, state={}, conversation=[], metadata={"redacted_at": now.isoformat()}
        )
        Step.objects.filter(run_id__in=run_ids).update(
            args={}, result=None, recorded_result=None, rationale="", error=None
        )
        StepAttempt.objects.filter(step__run_id__in=run_ids).update(error=None)
        ToolCall.objects.filter(run_id__in=run_ids).update(result=None)
        Checkpoint.objects.filter(run_id__in=run_ids).delete()
    _timed_batch(report, started)
    report.redacted_runs += len(run_ids)


def retention_purge(
    *,
    actor: Actor,
    dry_run: bool = False,
    batch_size: int | None = None,
    now: Any = None,
) -> dict[str, Any]:
    """Apply every enabled ``RetentionPolicy``, then expire audit chains; return the counts.

    Runs are handled in chunks of 500, their steps deleted in transactions of at most
    ``batch_size`` steps (default ``AGENTOPS_RETENTION_BATCH_SIZE``), child rows first, so no
    transaction holds many locks for long. Audit events outlive their runs: a run's whole
    chain is deleted once the run is gone and its newest event is older than
    ``AGENTOPS_AUDIT_RETENTION_DAYS`` days. Unless ``dry_run`` (count only, change nothing),
    the purge records a ``retention.purged`` audit event with its counts. Returns
    ``RetentionReport.as_dict()`` (times in ms and s).
    """
    now = now or timezone.now()
    batch = batch_size or settings.AGENTOPS_RETENTION_BATCH_SIZE
    report = RetentionReport(dry_run=dry_run)
    began = time.monotonic()
    for policy in RetentionPolicy.objects.filter(enabled=True):
        expired = Run.objects.filter(
            status__in=policy.statuses, finished_at__lt=now - timedelta(days=policy.ttl_days)
        )
        if policy.agent:
            expired = expired.filter(agent=policy.agent)
        if policy.action == RetentionAction.REDACT:
            expired = expired.exclude(metadata__has_key="redacted_at")
        if dry_run:
            count = expired.count()
            if policy.action == RetentionAction.REDACT:
                report.redacted_runs += count
            else:
                report.runs += count
                report.steps += Step.objects.filter(run__in=expired).count()
            continue
        while chunk := list(expired.values_list("pk", flat=True)[:_RETENTION_RUN_CHUNK]):
            if policy.action == RetentionAction.REDACT:
                _redact_runs(chunk, now, report)
            else:
                _delete_runs(chunk, batch, report)
    audit_cutoff = now - timedelta(days=settings.AGENTOPS_AUDIT_RETENTION_DAYS)
    expired_chains = audit_chains_expired(
        older_than=audit_cutoff, live_run_ids=Run.objects.values("pk")
    )
    if dry_run:
        report.audit_events = AuditEvent.objects.filter(chain__in=expired_chains).count()
    else:
        report.audit_events, longest = audit_purge_chains(
            chains=expired_chains, batch_size=batch, actor=actor
        )
        report.longest_batch_ms = max(report.longest_batch_ms, longest)
    report.seconds = time.monotonic() - began
    if not dry_run:
        with audited_atomic():
            audit_record(
                actor=actor,
                verb="retention.purged",
                object_type="retention",
                object_id="all",
                payload={**report.as_dict(), "now": now.isoformat()},
            )
    return report.as_dict()
