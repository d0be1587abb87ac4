"""Retention: deleting or redacting finished runs that their policies let expire, and the
audit chains that outlived their runs.

Each app deletes its own rows: this module deletes those of runs (steps, attempts, checkpoints,
ledger rows, the runs), other apps' rows that hang off them through the ``DependentRows`` they
register at start-up, and audit events through ``audit.services.audit_purge_chains``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, Max, Min, OuterRef, QuerySet
from django.utils import timezone

from agentops.actors import Actor
from artifacts.retention import artifacts_delete_for_runs
from audit.models import AuditEvent, session_chain
from audit.selectors import audit_chains_expired
from audit.services import audit_purge_chains, audit_record, audited_atomic
from runs.models import (
    AgentSession,
    Checkpoint,
    Compaction,
    Message,
    RetentionAction,
    RetentionPolicy,
    Run,
    SessionStatus,
    StateVersion,
    Step,
    StepAttempt,
    ToolCall,
)
from runs.queries import runs_delete, steps_delete
from runs.statuses import RUN_TERMINAL, STEP_OPEN

# Runs handled per chunk.
_RETENTION_RUN_CHUNK = 500


class DependentRows(Protocol):
    """Another app's rows that hang off runs and steps (an approval request and its
    decisions), deleted by that app's own code when retention deletes what they hang off.
    Registered at start-up (``register_dependent_rows``); the delete methods run inside the
    retention transaction that deletes the steps or runs."""

    def exclude_open(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` without those this app still holds open (a pending approval request):
        retention never touches them, whatever their status says."""

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
    steps deleted, closed sessions deleted, audit events deleted; ``batches`` transactions,
    the longest in ms."""

    dry_run: bool
    runs: int = 0
    steps: int = 0
    redacted_runs: int = 0
    sessions: int = 0
    audit_events: int = 0
    batches: int = 0
    longest_batch_ms: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _timed_batch(report: RetentionReport, started: float) -> None:
    report.batches += 1
    report.longest_batch_ms = max(report.longest_batch_ms, (time.monotonic() - started) * 1000)


def retention_candidates(policy: RetentionPolicy, *, now: datetime) -> QuerySet[Run]:
    """The runs ``policy`` deletes or redacts at ``now``: finished (a terminal status among
    the policy's ``statuses``; any other status in them is ignored) more than ``ttl_days``
    days before ``now``, of its agent (if set) and its project (a global policy: of the
    projects without an enabled policy of their own), not yet redacted (for ``redact``), and
    holding nothing open: no step that is not terminal (waiting at a gate, queued, running,
    ...) and nothing another app holds open (a pending approval, ``DependentRows``)."""
    statuses = policy.statuses if isinstance(policy.statuses, list) else []
    expired = Run.objects.filter(
        status__in=[status for status in statuses if status in RUN_TERMINAL],
        finished_at__lt=now - timedelta(days=policy.ttl_days),
    ).filter(~Exists(Step.objects.filter(run=OuterRef("pk"), status__in=STEP_OPEN)))
    if policy.agent:
        expired = expired.filter(agent=policy.agent)
    if policy.project_id is not None:
        expired = expired.filter(project_id=policy.project_id)
    else:
        own = RetentionPolicy.objects.filter(enabled=True, project__isnull=False)
        expired = expired.exclude(project_id__in=own.values("project_id"))
    if policy.action == RetentionAction.REDACT:
        expired = expired.exclude(metadata__has_key="redacted_at")
    for dependent in _dependents:
        expired = dependent.exclude_open(expired)
    return expired


def retention_policy_as_json(policy: RetentionPolicy) -> dict[str, Any]:
    """A retention policy as its project's policy records it (``runs.policy``)."""
    fields = ("name", "enabled", "statuses", "agent", "ttl_days", "action", "project_id")
    return {name: getattr(policy, name) for name in fields}


@dataclass(frozen=True)
class RetentionPreview:
    """What one policy would do now: ``action`` (a ``RetentionAction``) on ``runs`` runs
    holding ``steps`` steps, about which ``events`` audit events were recorded (those outlive
    the runs until ``AGENTOPS_AUDIT_RETENTION_DAYS``); ``oldest`` and ``newest`` are the
    earliest and latest ``finished_at`` among them (None when there is none)."""

    action: str
    runs: int
    steps: int
    events: int
    oldest: datetime | None
    newest: datetime | None


def retention_preview(*, policy: RetentionPolicy, now: datetime | None = None) -> RetentionPreview:
    """Count what ``policy`` would delete or redact at ``now`` (default: now), changing
    nothing (four queries)."""
    expired = retention_candidates(policy, now=now or timezone.now())
    span = expired.aggregate(runs=Count("pk"), oldest=Min("finished_at"), newest=Max("finished_at"))
    return RetentionPreview(
        action=policy.action,
        runs=span["runs"],
        steps=Step.objects.filter(run__in=expired.values("pk")).count(),
        events=AuditEvent.objects.filter(run_id__in=expired.values("pk")).count(),
        oldest=span["oldest"],
        newest=span["newest"],
    )


def _lock_finished(run_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The given runs that are still finished, locked (first, as every transition locks
    them): a run resumed since it was chosen is left alone, and none can be resumed while a
    batch deletes."""
    finished = Run.objects.select_for_update().filter(pk__in=run_ids, status__in=RUN_TERMINAL)
    return list(finished.values_list("pk", flat=True))


Progress = Callable[[RetentionReport], None]


def _delete_runs(
    run_ids: list[uuid.UUID], batch_size: int, report: RetentionReport, progress: Progress
) -> None:
    """Delete runs and all their rows, at most ``batch_size`` steps per transaction; each
    transaction first locks the runs and drops any that is no longer finished; ``progress``
    is called after each."""
    if connection.vendor != "postgresql":
        # The embedded SQLite default: Django's cascade, in one transaction per chunk. The
        # other apps' rows go through them first: the cascade would leave their files.
        started = time.monotonic()
        with transaction.atomic():
            finished = Run.objects.filter(pk__in=run_ids, status__in=RUN_TERMINAL)
            report.steps += Step.objects.filter(run__in=finished).count()
            finished_ids = list(finished.values_list("pk", flat=True))
            for dependent in _dependents:
                dependent.delete_for_runs(finished_ids)
            report.runs += finished.delete()[1].get("runs.Run", 0)
        _timed_batch(report, started)
        return
    while True:
        started = time.monotonic()
        with transaction.atomic():
            run_ids = _lock_finished(run_ids)
            if not run_ids:
                return
            # A batch of steps of the given runs, locked: what one retention transaction
            # deletes.
            batch = Step.objects.select_for_update().filter(run_id__in=run_ids)
            step_ids = list(batch.values_list("pk", flat=True)[:batch_size])
            if step_ids:
                for dependent in _dependents:
                    dependent.delete_for_steps(step_ids)
                steps_delete(step_ids=step_ids)
        _timed_batch(report, started)
        report.steps += len(step_ids)
        progress(report)
        if len(step_ids) < batch_size:
            break
    started = time.monotonic()
    with transaction.atomic():
        run_ids = _lock_finished(run_ids)
        for dependent in _dependents:
            dependent.delete_for_runs(run_ids)
        report.runs += runs_delete(run_ids=run_ids)
    _timed_batch(report, started)


def _redact_runs(run_ids: list[uuid.UUID], now: Any, report: RetentionReport) -> None:
    """Blank the data of runs (kept as rows, statuses and timings) in one transaction."""
    started = time.monotonic()
    with transaction.atomic():
        run_ids = list(
            Run.objects.select_for_update()
            .filter(pk__in=run_ids, status__in=RUN_TERMINAL)
            .values_list("pk", flat=True)
        )
        Run.objects.filter(pk__in=run_ids).update(
            input={},
            state={},
            message_count=0,
            context_tokens=0,
            metadata={"redacted_at": now.isoformat()},
        )
        Message.objects.filter(run_id__in=run_ids).delete()
        Compaction.objects.filter(run_id__in=run_ids).delete()
        Step.objects.filter(run_id__in=run_ids).update(
            args={}, result=None, recorded_result=None, rationale="", error=None
        )
        StepAttempt.objects.filter(step__run_id__in=run_ids).update(error=None)
        ToolCall.objects.filter(run_id__in=run_ids).update(result=None)
        Checkpoint.objects.filter(run_id__in=run_ids).delete()
        StateVersion.objects.filter(run_id__in=run_ids).delete()
        artifacts_delete_for_runs(run_ids)
    _timed_batch(report, started)
    report.redacted_runs += len(run_ids)


def _delete_closed_sessions(
    now: datetime, batch: int, report: RetentionReport, actor: Actor
) -> None:
    """Delete the sessions closed more than ``AGENTOPS_SESSION_RETENTION_DAYS`` days before
    ``now`` (0: none), 500 a transaction: the items added to them directly, their
    compactions and state versions go with them; their runs' messages leave the session and
    stay the runs' (the runs follow their own policies); then the sessions' audit chains are
    purged (``audit_purge_chains``, which records the purge in the system chain). With
    ``report.dry_run``, count them only."""
    days: int = settings.AGENTOPS_SESSION_RETENTION_DAYS
    if not days:
        return
    expired = AgentSession.objects.filter(
        status=SessionStatus.CLOSED, closed_at__lt=now - timedelta(days=days)
    )
    if report.dry_run:
        report.sessions += expired.count()
        return
    ids = list(expired.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), _RETENTION_RUN_CHUNK):
        chunk = ids[start : start + _RETENTION_RUN_CHUNK]
        started = time.monotonic()
        with transaction.atomic():
            Message.objects.filter(session_id__in=chunk, run__isnull=False).update(
                session=None, session_position=None
            )
            AgentSession.objects.filter(pk__in=chunk).delete()
        _timed_batch(report, started)
        report.sessions += len(chunk)
    if ids:
        deleted, longest = audit_purge_chains(
            chains=[session_chain(pk) for pk in ids], batch_size=batch, actor=actor
        )
        report.audit_events += deleted
        report.longest_batch_ms = max(report.longest_batch_ms, longest)


def retention_purge(
    *,
    actor: Actor,
    dry_run: bool = False,
    batch_size: int | None = None,
    now: Any = None,
    policy_id: int | None = None,
    purge_id: int | None = None,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Apply every enabled ``RetentionPolicy``, delete long-closed sessions
    (``_delete_closed_sessions``), then expire audit chains; return the counts.

    With ``policy_id``, apply that policy alone (enabled or not) and leave the audit chains
    to the full purge. Which runs a policy takes is ``retention_candidates``: never one that
    is not finished or holds anything open (a step waiting at a gate, a pending approval).
    Runs are handled in chunks of 500, their steps deleted in transactions of at most
    ``batch_size`` steps (default ``AGENTOPS_RETENTION_BATCH_SIZE``), child rows first, so no
    transaction holds many locks for long; ``on_progress`` is called with the report so far
    after each transaction that deleted steps and after each chunk of runs. Audit events
    outlive their runs: a run's whole chain is deleted once the run is gone and its newest
    event is older than ``AGENTOPS_AUDIT_RETENTION_DAYS`` days. Unless ``dry_run`` (count
    only, change nothing), the purge records a ``retention.purged`` audit event with its
    counts (its ``object_id`` is ``purge_id``, the ``RetentionPurge`` it belongs to, or
    ``all``). Returns ``RetentionReport.as_dict()`` (times in ms and s).

    Raises:
        RetentionPolicy.DoesNotExist: no policy ``policy_id``.
    """
    now = now or timezone.now()
    batch = batch_size or settings.AGENTOPS_RETENTION_BATCH_SIZE
    report = RetentionReport(dry_run=dry_run)
    began = time.monotonic()
    progress: Progress = on_progress or (lambda report: None)
    if policy_id is None:
        policies = list(RetentionPolicy.objects.filter(enabled=True))
    else:
        policies = [RetentionPolicy.objects.get(pk=policy_id)]
    for policy in policies:
        expired = retention_candidates(policy, now=now)
        if dry_run:
            preview = retention_preview(policy=policy, now=now)
            if policy.action == RetentionAction.REDACT:
                report.redacted_runs += preview.runs
            else:
                report.runs += preview.runs
                report.steps += preview.steps
            continue
        # In id order from where the last chunk ended, so a run the batches leave alone (it
        # was resumed in between) is not chosen again.
        expired = expired.order_by("pk")
        last = None
        while chunk := list(
            (expired if last is None else expired.filter(pk__gt=last)).values_list("pk", flat=True)[
                :_RETENTION_RUN_CHUNK
            ]
        ):
            last = chunk[-1]
            if policy.action == RetentionAction.REDACT:
                _redact_runs(chunk, now, report)
            else:
                _delete_runs(chunk, batch, report, progress)
            progress(report)
    if policy_id is None:
        _delete_closed_sessions(now, batch, report, actor)
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
                object_id=purge_id or "all",
                payload={**report.as_dict(), "now": now.isoformat(), "policy": policy_id},
            )
    return report.as_dict()
