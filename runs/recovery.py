"""Recovery: what crashes and lost messages leave behind, found by the sweeper (Celery beat).

Running steps whose lease expired (their worker died or hung) are recovered through the ledger
rules; due retries, queued steps and stalled runs whose wake-up may be lost are woken again;
gates past their time expire; runs past their deadline end.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q

from agentops.actors import Actor
from agentops.clock import database_now
from audit.services import audited_atomic
from runs import gates
from runs.budget import Crossing
from runs.control.lifecycle import run_cancel
from runs.executor.call import structured_error
from runs.executor.finish import fail_run_locked
from runs.executor.gates import cancel_open_steps
from runs.executor.ledger import ledger_outcome_unknown
from runs.executor.outcome import fail_or_retry
from runs.idempotency import idempotency_keys_purge
from runs.models import CLIENT_DRIVEN, AgentKind, OnBudgetExceeded, Run, Step, StepAttempt
from runs.statuses import RUN_CANCELLABLE, STEP_IN_FLIGHT, AttemptStatus, RunStatus, StepStatus
from runs.transitions import lock_run, lock_run_of_step, lock_step
from runs.wakeups import advance_run_on_commit, execute_step_on_commit, retry_step_on_commit


def step_recover_lost(*, step_id: int, actor: Actor) -> bool:
    """Recover a running step whose lease expired: its worker died or hung.

    The attempt is marked ``lost`` with a ``worker_lost`` error; the step then waits to retry
    or fails like any failed attempt, except that a non-idempotent call whose ledger row is
    still ``started`` fails with ``outcome_unknown`` instead of being repeated. Returns True
    when the step was recovered.
    """
    with audited_atomic():
        run = lock_run_of_step(step_id)
        if run is None:
            return False
        step = lock_step(step_id)
        # The database's clock, which wrote the lease: once the step is locked, so that a
        # heartbeat committed while this waited counts.
        now = database_now()
        if step.status != StepStatus.RUNNING or (
            step.lease_expires_at and step.lease_expires_at > now
        ):
            return False
        error = structured_error(
            "worker_lost",
            f"the lease of {step.lease_owner or 'its worker'} expired "
            f"at {step.lease_expires_at.isoformat() if step.lease_expires_at else 'once'}",
            attempt=step.attempts,
            retryable=True,
        )
        StepAttempt.objects.filter(step=step, number=step.attempts).update(
            status=AttemptStatus.LOST, finished_at=now, error=error
        )
        if run.agent != AgentKind.TRANSCRIPT and ledger_outcome_unknown(step):
            error = {
                **error,
                "type": "outcome_unknown",
                "retryable": False,
                "message": error["message"] + "; the call may have taken effect and "
                f"{step.tool} is not idempotent: not repeated",
            }
        fail_or_retry(run, step, error, actor, now)
    return True


def sweep(*, actor: Actor) -> dict[str, int]:
    """Recover what lost messages and crashes leave behind; run periodically by Celery beat.

    Recovers running steps whose lease expired (``step_recover_lost``); re-sends due retries,
    queued steps and stalled runs whose message may be lost (unchanged for longer than
    ``AGENTOPS_REQUEUE_AFTER_SECONDS``: a run still queued, or running with nothing in flight
    but something to do), a step at most once per that period; asks every gate kind to
    expire what waited too long, fails runs past their deadline (those whose budget policy is
    to fail: under the approve policy their next step waits instead) and forgets expired
    ``Idempotency-Key``s. Returns counts by kind.
    """
    # Every time compared here was written from the database's clock (leases, retries), or
    # is a deadline: the sweeper's host clock never decides.
    now = database_now()
    stale = now - timedelta(seconds=settings.AGENTOPS_REQUEUE_AFTER_SECONDS)
    counts = {
        "lost": 0,
        "retries": 0,
        "queued": 0,
        "stalled_runs": 0,
        "expired_gates": 0,
        "idempotency_keys_purged": 0,
        "deadlines": 0,
    }
    for step_id in Step.objects.filter(
        status=StepStatus.RUNNING, lease_expires_at__lt=now
    ).values_list("pk", flat=True):
        counts["lost"] += step_recover_lost(step_id=step_id, actor=actor)
    # A step is re-sent at most once per AGENTOPS_REQUEUE_AFTER_SECONDS (updated_at records the
    # re-send): one waiting behind a long backlog is not lost, and re-sending it on every sweep
    # would only lengthen the backlog it waits in.
    retry_ids = list(
        Step.objects.filter(
            status=StepStatus.WAITING_RETRY, next_attempt_at__lte=now, updated_at__lte=stale
        ).values_list("pk", flat=True)
    )
    queued_ids = list(
        Step.objects.filter(status=StepStatus.QUEUED, updated_at__lte=stale).values_list(
            "pk", flat=True
        )
    )
    Step.objects.filter(pk__in=retry_ids + queued_ids).update(updated_at=now)
    for step_id in retry_ids:
        retry_step_on_commit(step_id, 0)
        counts["retries"] += 1
    for step_id in queued_ids:
        execute_step_on_commit(step_id)
        counts["queued"] += 1
    stalled = (
        Run.objects.filter(updated_at__lte=stale)
        .filter(
            Q(status=RunStatus.QUEUED)
            | Q(status=RunStatus.RUNNING)
            & (
                Q(steps__status=StepStatus.PENDING)
                | ~Q(agent__in=CLIENT_DRIVEN)
                | Q(client_done=True)
            )
        )
        .exclude(steps__status__in=STEP_IN_FLIGHT)
        .distinct()
    )
    for run_id in stalled.values_list("pk", flat=True):
        advance_run_on_commit(run_id)
        counts["stalled_runs"] += 1
    for kind in gates.kinds():
        counts["expired_gates"] += kind.expire_due(actor=actor)
    counts["idempotency_keys_purged"] = idempotency_keys_purge()
    for run_id in Run.objects.filter(
        status__in=RUN_CANCELLABLE,
        deadline__lte=now,
        on_budget_exceeded=OnBudgetExceeded.FAIL,
    ).values_list("pk", flat=True):
        with audited_atomic():
            run = lock_run(run_id)
            if run.is_terminal:
                continue
            if run.status == RunStatus.QUEUED:
                run_cancel(run_id=run.pk, actor=actor, reason="deadline passed before it started")
            else:
                cancel_open_steps(run, actor, now)
                deadline = Crossing(
                    "deadline", now.isoformat(), run.deadline.isoformat() if run.deadline else ""
                )
                fail_run_locked(run, actor, deadline.as_json())
        counts["deadlines"] += 1
    return counts
