"""The executor's entry points, one per wake-up (``runs.tasks``): advance a run, execute a
queued step, retry a step whose backoff has passed."""

from __future__ import annotations

import uuid
from datetime import timedelta

from agentops.actors import Actor
from agentops.clock import database_now
from audit.services import audited_atomic
from runs.executor.advance import advance_locked
from runs.executor.claim import claim_step
from runs.executor.record import execute_claims
from runs.statuses import StepStatus
from runs.store.locks import lock_step_of_running_run
from runs.transitions import lock_run, transition


def run_advance(*, run_id: uuid.UUID | str, actor: Actor, execute: bool = False) -> None:
    """Advance the run ``run_id`` (see ``advance_locked``) in its own transaction.

    With ``execute`` (the caller is a worker), the step it queues is claimed for ``actor`` and
    executed here, with the steps after it (``execute_claims``), instead of being sent to the
    workers.

    Raises:
        Run.DoesNotExist: unknown run.
    """
    with audited_atomic():
        claim = advance_locked(lock_run(run_id), actor, claim=execute)
    execute_claims(claim, actor)


def step_execute(*, step_id: int, actor: Actor) -> None:
    """Claim a queued step, run its tool, and record the outcome; then advance the run.

    Claiming (queued → running, one more attempt, a lease naming ``actor``, the ledger row of
    its idempotency key opened as ``started``) is one transaction; the tool runs outside any
    transaction with the step's timeout; recording the outcome (succeeded with the verbatim
    result, a checkpoint and the next step queued; or waiting_retry with exponential backoff;
    or failed, failing the run) is a second one, which also claims the run's next step for
    this worker when it can run at once (see ``execute_claims``). A step that is not queued
    (a duplicate message, a cancelled run) is left alone. A key the ledger holds as succeeded
    returns its recorded result without calling the tool; a non-idempotent call whose outcome
    is unknown is not repeated (``outcome_unknown``).
    """
    execute_claims(claim_step(step_id, actor), actor)


def step_retry_due(*, step_id: int, actor: Actor) -> bool:
    """Queue a step waiting to retry once its ``next_attempt_at`` has come by the database's
    clock, which wrote it (a wake-up up to 1 s early counts as due).

    Returns True when the step was queued (the caller then executes it).
    """
    with audited_atomic():
        locked = lock_step_of_running_run(step_id, StepStatus.WAITING_RETRY)
        if locked is None:
            return False
        _, step = locked
        if step.next_attempt_at and step.next_attempt_at > database_now() + timedelta(seconds=1):
            return False
        transition(step, "enqueue", actor=actor)
    return True
