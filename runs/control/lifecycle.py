"""A run's lifecycle after creation: its client completes it, an operator cancels or
resumes it."""

from __future__ import annotations

import uuid

from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from agentops.storable import require_storable
from audit.services import audited_atomic
from runs.executor.advance import advance_locked
from runs.executor.finish import compensation_failure
from runs.executor.gates import cancel_open_steps
from runs.models import CLIENT_DRIVEN, Executor, Run
from runs.statuses import RunStatus, StepStatus
from runs.transitions import lock_run, record_event, record_transition, save_run, save_step
from runs.wakeups import execute_step_on_commit

# The longest cancel reason kept (in the run's error and the audit event).
MAX_REASON = 1000


def lock_client_run(run_id: uuid.UUID | str, action: str) -> Run:
    """The client run ``run_id``, locked (``lock_run``), while its client may still act on it
    (``check_client_run``, whose ``action`` it passes on).

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput, Conflict: as ``check_client_run``.
    """
    run = lock_run(run_id)
    check_client_run(run, action)
    return run


def check_client_run(run: Run, action: str) -> None:
    """Check that the client of the locked ``run`` may still act on it: it is a client run, not
    finished, and its client has not completed it. ``action`` says what only client runs
    do, for the error (``"report model turns"``).

    Raises:
        InvalidInput: not a client run.
        Conflict: the run is already finished or completed.
    """
    if run.agent not in CLIENT_DRIVEN:
        raise InvalidInput(f"only client runs {action}, not {run.agent} runs")
    if run.is_terminal:
        raise Conflict(f"run is already {run.status}")
    if run.client_done:
        raise Conflict("the client already completed this run")


def run_complete(*, run_id: uuid.UUID, actor: Actor) -> Run:
    """A client app says it appends no more steps; the run succeeds once its steps are done.

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: not a client run.
        Conflict: the run is already finished or completed.
    """
    with audited_atomic():
        run = lock_client_run(run_id, "are completed by their client")
        run.client_done = True
        save_run(run)
        record_event(actor, run, "client_completed")
        advance_locked(run, actor)
    return run


def run_cancel(*, run_id: uuid.UUID, actor: Actor, reason: str = "") -> Run:
    """Cancel a run and every step and approval still open; a compensating run ends
    ``compensation_failed`` instead, with what is left undone
    (``runs.executor.finish.compensation_failure``).

    A step that is running when the run is cancelled finishes on its worker, but its outcome
    no longer moves the run (``step_execute`` sees the step cancelled).

    Raises:
        InvalidInput: ``reason`` is longer than ``MAX_REASON`` characters or holds NUL or an
            unpaired surrogate.
        Run.DoesNotExist: unknown run.
        TransitionNotAllowed: the run has already ended.
    """
    require_storable(reason, field="reason", max_length=MAX_REASON)
    with audited_atomic():
        run = lock_run(run_id)
        from_state, from_gate = run.status, run.gate
        error = {"type": "cancelled", "message": reason or "cancelled", "by": actor.name}
        now = timezone.now()
        if run.compensating:
            # Its remaining compensations will not run: the run says what they leave undone.
            error = compensation_failure(run, error)
            run.fail_compensation(error=error)
        else:
            run.cancel(error=error)
        run.finished_at = now
        save_run(run)
        record_transition(actor, run, from_state, from_gate=from_gate, reason=reason)
        cancel_open_steps(run, actor, now)
    return run


def run_resume(*, run_id: uuid.UUID, actor: Actor) -> Run:
    """Continue a failed run from its failed step; steps that succeeded are not run again.

    The failed step is queued again with fresh attempts (its earlier attempts are kept); a
    client step is made ``ready`` for its client again, under the same idempotency key.

    Raises:
        Run.DoesNotExist: unknown run.
        TransitionNotAllowed: the run is not failed.
        Conflict: a reviewer rejected, or its policy refused, the step the run failed on (fork
            the run instead).
    """
    with audited_atomic():
        run = lock_run(run_id)
        # The step the run failed on: the last that ran or was refused (the ones after it
        # were skipped, or never started).
        tried = run.steps.select_for_update().exclude(
            status__in=[StepStatus.PENDING, StepStatus.SKIPPED]
        )
        failed = tried.order_by("-index").first()
        if failed is not None and failed.status == StepStatus.REJECTED:
            raise Conflict("a reviewer rejected this run's step: it cannot be resumed")
        if failed is not None and failed.status == StepStatus.REFUSED:
            raise Conflict("this run's step was refused by its policy: it cannot be resumed")
        run.resume()
        run.finished_at = None
        save_run(run)
        record_transition(actor, run, RunStatus.FAILED)
        if failed is not None and failed.status == StepStatus.FAILED:
            if failed.executor == Executor.CLIENT:
                failed.retry_by_client(now=timezone.now())
                save_step(failed, status_was=StepStatus.FAILED)
                record_transition(
                    actor, failed, StepStatus.FAILED, idempotency_key=failed.idempotency_key
                )
            else:
                failed.retry()
                save_step(failed, status_was=StepStatus.FAILED)
                record_transition(actor, failed, StepStatus.FAILED)
                execute_step_on_commit(failed.pk)
        else:
            advance_locked(run, actor)
    return run
