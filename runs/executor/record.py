"""Getting one attempt's outcome (its tool called while a heartbeat extends the step's lease)
and recording it: the ledger settled, the step succeeded (with its checkpoint), waiting to
retry with backoff, or failed; then the run moved on, with its next step claimed for the same
worker when it can run at once."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from agentops.actors import Actor
from agentops.clock import DatabaseNow
from artifacts.services import offload_large_result
from runs.executor.advance import advance_locked
from runs.executor.call import Outcome, call_tool, structured_error
from runs.executor.claim import Claim
from runs.executor.gates import gate_hold_result_locked
from runs.executor.ledger import CALL, LEDGER, REPLAY, UNKNOWN, ledger_settle
from runs.executor.outcome import fail_or_retry, succeed_locked
from runs.gates import StepRequest, step_policy
from runs.models import Run, Step
from runs.statuses import AttemptStatus, StepStatus
from runs.store.step import Ahead, StaleAhead, check_ahead, leave_ahead, lock_for_record
from runs.store.transaction import pipelined_atomic
from runs.store.writes import attempt_finish
from runs.tools import (
    ToolContext,
    ValidationFailure,
    get_tool,
    tool_error_of,
    validation_failure,
)
from runs.tools.validators import GATE

logger = logging.getLogger(__name__)

# Attempts at recording an outcome after the database connection dropped.
RECORD_RETRIES = 3


def outcome_of(claim: Claim, actor: Actor) -> Outcome:
    """The outcome of a claimed step: the ledger's recorded result, a refusal to repeat a call
    whose outcome is unknown, the recorded output of a transcript step, or its tool's call
    (with a heartbeat that extends the lease while it runs)."""
    step = claim.step
    if claim.plan == LEDGER:
        return Outcome(True, claim.ledger_result, from_ledger=True)
    if claim.plan == UNKNOWN:
        return Outcome(
            False,
            error=structured_error(
                "outcome_unknown",
                f"an earlier attempt of {step.tool} may have taken effect and the tool is not "
                "idempotent: not repeated",
                attempt=step.attempts,
                retryable=False,
            ),
        )
    if claim.plan == REPLAY:
        # A transcript step: its effect happened in the recorded conversation; replay it.
        return Outcome(True, step.recorded_result)
    tool = get_tool(step.tool)
    if tool is None:
        return Outcome(
            False,
            error=structured_error(
                "unknown_tool",
                f"no tool named {step.tool!r} is registered",
                attempt=step.attempts,
                retryable=False,
            ),
        )
    ctx = ToolContext(
        idempotency_key=step.idempotency_key,
        run_id=str(step.run_id),
        step_id=step.pk,
        attempt=step.attempts,
        timeout_seconds=step.timeout_seconds,
        heartbeat=lambda: step_heartbeat(
            step_id=step.pk,
            owner=actor.id,
            extend_seconds=step.timeout_seconds + settings.AGENTOPS_LEASE_MARGIN_SECONDS,
        ),
    )
    outcome = call_tool(tool, step.args, ctx)
    if outcome.ok:
        # A result over the threshold is kept as an artifact; the step holds a reference.
        outcome.result = offload_large_result(
            run_id=step.run_id, step_id=step.pk, result=outcome.result, actor=actor
        )
    return outcome


def step_heartbeat(*, step_id: int, owner: str, extend_seconds: int) -> bool:
    """Extend the lease of a running step held by ``owner`` to now + ``extend_seconds``
    (seconds), now by the database's clock (``agentops.clock``).

    Returns False when the lease is no longer ``owner``'s (the step was cancelled or recovered):
    the tool should stop. One conditional UPDATE, no lock held.
    """
    lease = DatabaseNow() + timedelta(seconds=extend_seconds)
    updated = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, lease_owner=owner).update(
        lease_expires_at=lease
    )
    return updated == 1


def record_outcome(
    claim: Claim, outcome: Outcome, actor: Actor, *, claim_next: bool = False
) -> Claim | None:
    """Record one attempt's outcome and advance the run (one transaction); with
    ``claim_next``, claim the run's next step for ``actor`` if it can run at once.

    The transaction is pipelined (``runs.store.transaction.pipelined_atomic``): its locks and
    reads are one round trip, its writes, audit events and COMMIT a second. When the claim's own
    transaction left what this one reads (``claim.ahead``, PostgreSQL), the reads are
    replaced by a check of it sent with the writes: one round trip in all. If the check
    fails (another transaction changed the run, the step, the next step or the chain
    meanwhile), nothing is written and the transaction runs again with its reads. A claim
    this transaction makes carries its own ``ahead``."""
    ahead, claim.ahead = claim.ahead, None
    if ahead is not None:
        try:
            return _record(claim, outcome, actor, claim_next, ahead)
        except StaleAhead:
            logger.debug("run of step %s changed since its claim; reading it", claim.step.pk)
    return _record(claim, outcome, actor, claim_next, None)


def _record(
    claim: Claim, outcome: Outcome, actor: Actor, claim_next: bool, ahead: Ahead | None
) -> Claim | None:
    with pipelined_atomic() as moved:
        if ahead is None:
            run, step, upcoming = lock_for_record(claim.step)
        else:
            run, step, upcoming = check_ahead(claim.step, ahead)
        claimed = _record_locked(claim, outcome, actor, claim_next, run, step, upcoming)
        leave = leave_ahead(run, claimed.step if claimed else None, ahead)
    if leave is not None and claimed is not None:
        claimed.ahead = leave(moved)
    return claimed


def _record_locked(
    claim: Claim,
    outcome: Outcome,
    actor: Actor,
    claim_next: bool,
    run: Run,
    step: Step,
    upcoming: list[Step],
) -> Claim | None:
    """The writes of ``record_outcome`` to the locked (or checked) ``run``, its claimed
    ``step`` and its first other open step (``upcoming``)."""
    now = timezone.now()
    failure = _validation_failure(claim, outcome, run)
    ledger_settle(claim.step, claim.plan, outcome, now, invalid=failure is not None)
    error = outcome.error
    if failure is not None:
        error = {
            **structured_error(
                "validation_failed",
                "",
                attempt=claim.step.attempts,
                retryable=failure.validator.retry,
            ),
            **failure.as_error(),
        }
    attempt_finish(
        step.pk,
        claim.step.attempts,
        {
            "status": AttemptStatus.SUCCEEDED if error is None else AttemptStatus.FAILED,
            "finished_at": now,
            "duration_ms": outcome.duration_ms,
            "error": error,
        },
    )
    if step.status != StepStatus.RUNNING or step.attempts != claim.step.attempts:
        # Cancelled, or recovered by the sweeper, while the tool ran: the attempt and any
        # effect are on record above, but this outcome no longer moves the step.
        return None
    run.duration_ms += outcome.duration_ms
    if failure is not None and error is not None:
        if failure.validator.on_failure == GATE and gate_hold_result_locked(
            run, step, actor, result=outcome.result, error=error, now=now
        ):
            return None
        fail_or_retry(run, step, error, actor, now)
        return None
    if not outcome.ok:
        fail_or_retry(run, step, outcome.error or {}, actor, now)
        return None
    # A result in the tool's error form completes the step all the same (the agent gets
    # the answer), marked a tool error.
    succeed_locked(
        run,
        step,
        outcome.result,
        actor,
        now=now,
        tool_error=tool_error_of(step.tool, outcome.result),
        duration_ms=outcome.duration_ms,
        from_ledger=outcome.from_ledger,
    )
    return advance_locked(run, actor, claim=claim_next, first_open=upcoming)


def _validation_failure(claim: Claim, outcome: Outcome, run: Run) -> ValidationFailure | None:
    """How the result of a tool agentops just called fails its tool's validators, then those
    its ``run``'s step policy adds (risk rules': ``StepPolicy.validators``), if it does
    (``runs.tools.validators``). Only a call's own answer is checked: not a tool error (an
    answer for the agent), a recorded result the ledger returns (checked when it was
    recorded) or a transcript's replayed output."""
    step = claim.step
    tool = get_tool(step.tool)
    if tool is None or claim.plan != CALL or not outcome.ok:
        return None
    if tool_error_of(step.tool, outcome.result):
        return None
    request = StepRequest(step.tool, step.args, project_id=run.project_id)
    validators = tool.validators + step_policy().validators(request)
    return validation_failure(validators, outcome.result)


def _record_with_retries(
    claim: Claim, outcome: Outcome, actor: Actor, *, claim_next: bool
) -> Claim | None:
    # The outcome is known only in this process: losing it to a dropped database connection
    # would leave the call's outcome unknown. Retry recording on a fresh connection.
    for retry in range(RECORD_RETRIES + 1):
        try:
            return record_outcome(claim, outcome, actor, claim_next=claim_next)
        except (OperationalError, InterfaceError):
            if retry == RECORD_RETRIES:
                raise
            logger.warning(
                "lost the database connection recording step %s; retrying", claim.step.pk
            )
            connection.close()
            time.sleep(0.5 * (retry + 1))
    return None


def execute_claims(claim: Claim | None, actor: Actor) -> None:
    """Execute a claimed step, then each next step of its run that the recording transaction
    claims for this worker, for up to ``AGENTOPS_CLAIM_NEXT_SECONDS`` seconds; a step queued
    after that is sent through the broker, so one long run does not keep a worker from the
    others."""
    until = time.monotonic() + settings.AGENTOPS_CLAIM_NEXT_SECONDS
    while claim is not None:
        outcome = outcome_of(claim, actor)
        claim = _record_with_retries(claim, outcome, actor, claim_next=time.monotonic() < until)
