"""Recording one attempt's outcome: the ledger settled, the step succeeded (with its
checkpoint), waiting to retry with backoff, or failed; then the run moved on, with its next
step claimed for the same worker when it can run at once."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from agentops import rows
from agentops.actors import Actor
from agentops.clock import DatabaseTime
from agentops.pipeline import current_batch
from artifacts.services import offload_large_result
from audit.models import AuditChainHead, run_chain
from audit.services import (
    ChainHeads,
    audit_prefetch,
    audit_prefetched,
    audit_reserve_ids_later,
    audited_atomic,
)
from runs.agents import agent_for
from runs.executor.advance import advance_locked
from runs.executor.call import Outcome, call_tool, structured_error
from runs.executor.claim import Ahead, Claim, step_heartbeat
from runs.executor.finish import fail_run_locked
from runs.executor.ledger import LEDGER, REPLAY, UNKNOWN, ledger_settle
from runs.models import Checkpoint, Run, Step, StepAttempt
from runs.statuses import OPEN_STEP_STATUSES, AttemptStatus, StepStatus
from runs.tools import ToolContext, get_tool, tool_error_of
from runs.transitions import record_transition, save_run, save_step, status_in
from runs.wakeups import retry_step_on_commit

logger = logging.getLogger(__name__)

# Attempts at recording an outcome after the database connection dropped.
RECORD_RETRIES = 3


def backoff_seconds(attempt: int) -> float:
    """Delay before the retry that follows attempt number ``attempt`` (1-based), in seconds.

    Exponential backoff with "equal jitter" (AWS Architecture Blog, "Exponential Backoff And
    Jitter", 2015): ``d = min(cap, base * 2**(attempt-1))``, then a uniform pick in
    ``[d/2, d]``, so retries of many steps do not arrive together. ``base`` and ``cap`` are
    ``AGENTOPS_RETRY_BASE_SECONDS`` and ``AGENTOPS_RETRY_MAX_SECONDS``.
    """
    ceiling = min(
        settings.AGENTOPS_RETRY_MAX_SECONDS,
        settings.AGENTOPS_RETRY_BASE_SECONDS * 2 ** max(0, attempt - 1),
    )
    return ceiling / 2 + random.uniform(0, ceiling / 2)


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


def tool_error_mark(tool_error: bool) -> dict[str, Any]:
    """What a step's ``succeeded`` audit event adds for a tool error: ``{"tool_error":
    true}``, else nothing (the payload of a plain success is unchanged)."""
    return {"tool_error": True} if tool_error else {}


def fail_or_retry(run: Run, step: Step, error: dict[str, Any], actor: Actor, now: Any) -> None:
    """After a failed attempt of a locked running step: wait to retry (after
    ``backoff_seconds``) when the error is retryable and attempts remain, else fail the step
    and the run."""
    if error.get("retryable") and step.attempts < step.max_attempts:
        delay = backoff_seconds(step.attempts)
        # Due by the database's clock, which the sweeper and the retry's wake-up compare with.
        step.schedule_retry(error=error, next_attempt_at=DatabaseTime(delay), now=now)
        save_step(step, status_was=StepStatus.RUNNING)
        record_transition(actor, step, StepStatus.RUNNING, error=error, retry_in_s=delay)
        save_run(run)
        retry_step_on_commit(step.pk, delay)
        return
    step.fail(error=error, now=now)
    save_step(step, status_was=StepStatus.RUNNING)
    record_transition(actor, step, StepStatus.RUNNING, error=error)
    fail_run_locked(run, actor, {**error, "step": step.index, "tool": step.tool})


# Audit events of the usual step transaction: the step succeeded, the next one queued and
# claimed (``audit_prefetch`` reserves their ids with the transaction's first reads).
_USUAL_EVENTS = 3
# Open steps read at once for the claims ahead (``_leave_ahead``): one read, and one
# reservation of event ids, for this many steps of a run.
_AHEAD_STEPS = 8


@cache
def _record_reads_sql() -> str:
    """The reads of ``_lock_for_record`` as one statement (PostgreSQL): the run, the step and
    the run's first other open step locked, then the run's audit chain head locked (its name
    as ``audit.models.run_chain`` makes it), then event ids reserved. Each LATERAL part
    refers to the one before it, so PostgreSQL must take the locks in that order (lock order:
    ``runs.transitions``; ids only under the head's lock, as ``audit_prefetch``)."""
    run_table, step_table = Run._meta.db_table, Step._meta.db_table
    steps = rows.column_list(Step)
    return f"""
SELECT r.*, s.*, n.*, h.events, h.last_event_id, h.last_hash, ids.ids
FROM (SELECT {rows.column_list(Run)} FROM {run_table} WHERE id = %s FOR UPDATE) r
CROSS JOIN LATERAL (
    SELECT {steps} FROM {step_table} WHERE id = %s AND run_id = r.id FOR UPDATE
) s
LEFT JOIN LATERAL (
    SELECT {steps} FROM {step_table}
    WHERE run_id = s.run_id AND {status_in(OPEN_STEP_STATUSES)} AND id <> s.id
    ORDER BY "index" LIMIT 1 FOR UPDATE
) n ON true
LEFT JOIN LATERAL (
    SELECT events, last_event_id, last_hash FROM {AuditChainHead._meta.db_table}
    WHERE chain = 'run:' || COALESCE(n.run_id, s.run_id)::text FOR UPDATE
) h ON true
CROSS JOIN LATERAL (
    SELECT array_agg(nextval(pg_get_serial_sequence('audit_auditevent', 'id'))) AS ids
    FROM generate_series(1, %s + 0 * COALESCE(h.events, 0))
) ids
"""  # noqa: S608


class StaleAhead(Exception):
    """What a claim's transaction left for recording its outcome (``Ahead``) no longer holds:
    another transaction changed the run, the claimed step, the run's next open step or its
    audit chain since. The recording transaction rolls back and runs again, reading them."""


@cache
def _ahead_check_sql() -> str:
    """The check of a claim's ``Ahead`` as one SELECT (PostgreSQL) that finds one row only if
    the run still has the version the claim committed, the claimed step is still running its
    attempt, the run's first other open step is still the one (with the status and
    ``updated_at``) read then, or still none, and the run's audit chain head is still the one
    the claim wrote, its last event's id below the first id reserved for this transaction (so
    the chain's events still commit in id order). It takes the same locks as
    ``_record_reads_sql``, in the same order."""
    run_table, step_table = Run._meta.db_table, Step._meta.db_table
    return f"""
SELECT 1
FROM (SELECT id, version FROM {run_table} WHERE id = %s FOR UPDATE) r
CROSS JOIN LATERAL (
    SELECT id, run_id, status, attempts FROM {step_table} WHERE id = %s AND run_id = r.id
    FOR UPDATE
) s
LEFT JOIN LATERAL (
    SELECT id, run_id, status, updated_at FROM {step_table}
    WHERE run_id = s.run_id AND {status_in(OPEN_STEP_STATUSES)} AND id <> s.id
    ORDER BY "index" LIMIT 1 FOR UPDATE
) n ON true
LEFT JOIN LATERAL (
    SELECT events, last_event_id FROM {AuditChainHead._meta.db_table}
    WHERE chain = 'run:' || COALESCE(n.run_id, s.run_id)::text FOR UPDATE
) h ON true
WHERE r.version = %s AND s.status = '{StepStatus.RUNNING}' AND s.attempts = %s
    AND n.id IS NOT DISTINCT FROM %s AND n.status IS NOT DISTINCT FROM %s
    AND n.updated_at IS NOT DISTINCT FROM %s
    AND h.events = %s AND h.last_event_id = %s AND h.last_event_id < %s
"""  # noqa: S608


def _check_ahead(claim: Claim, ahead: Ahead) -> tuple[Run, Step, list[Step]]:
    """Send the check of ``ahead`` (``_ahead_check_sql``) without waiting for it, and take
    what it stands for as read: the run, a copy of the claimed step (``claim.step`` stays as
    it was, for the transaction that runs again if the check fails) and the next open step;
    the chain head and the reserved event ids go to the audit writer. The commit fails with
    ``StaleAhead`` when the check found no row."""
    batch = current_batch()
    assert batch is not None  # inside audited_atomic(pipelined=True)
    run, step = ahead.run, claim.step
    upcoming = ahead.steps[0] if ahead.steps else None
    batch.expect_later(
        _ahead_check_sql(),
        [
            run.pk,
            step.pk,
            run.version,
            step.attempts,
            upcoming.pk if upcoming else None,
            upcoming.status if upcoming else None,
            upcoming.updated_at if upcoming else None,
            ahead.head[0],
            ahead.head[1],
            ahead.ids[0],
        ],
        StaleAhead(f"run {run.pk} changed since step {step.pk} was claimed"),
    )
    audit_prefetched(chain=run_chain(run.pk), head=ahead.head, ids=ahead.ids)
    return run, rows.clone(step), ahead.steps[:1]


def _lock_for_record(claim: Claim) -> tuple[Run, Step, list[Step]]:
    """Lock the claimed step's run, the step and the run's first other open step, and read
    the audit chain's head and reserve event ids, in one round trip (one statement on
    PostgreSQL, ``_record_reads_sql``); lock order as ``runs.transitions`` (run, steps, audit
    chain)."""
    batch = current_batch()
    assert batch is not None  # inside audited_atomic(pipelined=True)
    run_id, step_id = claim.step.run_id, claim.step.pk
    if batch.pipelined:
        read = batch.fetch_later(_record_reads_sql(), [run_id, step_id, _USUAL_EVENTS])
        batch.sync()
        ((*found, events, last_id, last_hash, ids),) = read()
        runs, steps = rows.width(Run), rows.width(Step)
        run = rows.instances(Run, [found[:runs]])[0]
        step = rows.instances(Step, [found[runs : runs + steps]])[0]
        upcoming = found[runs + steps :]
        head = None if events is None else (events, last_id, last_hash)
        audit_prefetched(chain=run_chain(run_id), head=head, ids=ids)
        return run, step, [] if upcoming[0] is None else rows.instances(Step, [upcoming])
    read_run = rows.select_later(Run, "id = %s", [run_id], lock=True)
    read_step = rows.select_later(Step, "id = %s", [step_id], lock=True)
    read_next = rows.select_later(
        Step,
        f"run_id = %s AND {status_in(OPEN_STEP_STATUSES)} AND id <> %s",
        [run_id, step_id],
        lock=True,
        order_by='"index"',
        limit=1,
    )
    audit_prefetch(chains=[run_chain(run_id)], events=_USUAL_EVENTS)
    batch.sync()
    (run,), (step,) = read_run(), read_step()
    return run, step, read_next()


def record_outcome(
    claim: Claim, outcome: Outcome, actor: Actor, *, claim_next: bool = False
) -> Claim | None:
    """Record one attempt's outcome and advance the run (one transaction); with
    ``claim_next``, claim the run's next step for ``actor`` if it can run at once.

    The transaction is pipelined (``audited_atomic(pipelined=True)``): its locks and reads
    are one round trip, its writes, audit events and COMMIT a second. When the claim's own
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
    with audited_atomic(pipelined=True) as moved:
        if ahead is None:
            run, step, upcoming = _lock_for_record(claim)
        else:
            run, step, upcoming = _check_ahead(claim, ahead)
        claimed = _record_locked(claim, outcome, actor, claim_next, run, step, upcoming)
        leave = _leave_ahead(run, claimed, ahead)
    if leave is not None and claimed is not None:
        claimed.ahead = leave(moved)
    return claimed


def _leave_ahead(
    run: Run, claimed: Claim | None, ahead: Ahead | None
) -> Callable[[ChainHeads], Ahead | None] | None:
    """Inside the recording transaction (pipelined), once its writes are made: when it
    claimed a step, what the next recording transaction needs. The rest of ``ahead`` (what
    this transaction checked) serves while it holds the steps after the claimed one and event
    ids; otherwise queue the reads: the run's next ``_AHEAD_STEPS`` open steps and event ids
    for as many steps, reserved under the chain's lock. Returns the function that, after the
    commit, makes the claim's ``Ahead`` (None: none can be made)."""
    batch = current_batch()
    if claimed is None or batch is None or not batch.pipelined:
        return None
    chain = run_chain(run.pk)
    if ahead is not None and ahead.steps and claimed.step is ahead.steps[0]:
        rest, complete = ahead.steps[1:], ahead.complete
        if rest or complete:

            def carry_on(moved: ChainHeads) -> Ahead | None:
                head = moved.get(chain)
                if head is None or len(moved) != 1:
                    return None  # ids went to another chain's events too: read again
                ids = ahead.ids[head[0] - ahead.head[0] :]
                if len(ids) < _USUAL_EVENTS:
                    return None
                return _committed(run, claimed, Ahead(run, rest, complete, head, ids))

            return carry_on
    read_steps = rows.select_later(
        Step,
        f"run_id = %s AND {status_in(OPEN_STEP_STATUSES)} AND id <> %s",
        [run.pk, claimed.step.pk],
        order_by='"index"',
        limit=_AHEAD_STEPS,
    )
    read_ids = audit_reserve_ids_later(_USUAL_EVENTS * _AHEAD_STEPS)

    def read(moved: ChainHeads) -> Ahead | None:
        head = moved.get(chain)
        if head is None:
            return None
        steps = read_steps()
        made = Ahead(run, steps, len(steps) < _AHEAD_STEPS, head, read_ids())
        return _committed(run, claimed, made)

    return read


def _committed(run: Run, claimed: Claim, ahead: Ahead) -> Ahead:
    """``ahead``, once the transaction that wrote ``run`` and claimed ``claimed`` committed:
    their rows now hold what the two instances hold."""
    rows.mark_saved(run)
    rows.mark_saved(claimed.step)
    return ahead


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
    ledger_settle(claim.step, claim.plan, outcome, now)
    rows.write_where(
        StepAttempt,
        {
            "status": AttemptStatus.SUCCEEDED if outcome.ok else AttemptStatus.FAILED,
            "finished_at": now,
            "duration_ms": outcome.duration_ms,
            "error": outcome.error,
        },
        {"step_id": step.pk, "number": claim.step.attempts},
    )
    if step.status != StepStatus.RUNNING or step.attempts != claim.step.attempts:
        # Cancelled, or recovered by the sweeper, while the tool ran: the attempt and any
        # effect are on record above, but this outcome no longer moves the step.
        return None
    run.duration_ms += outcome.duration_ms
    if not outcome.ok:
        fail_or_retry(run, step, outcome.error or {}, actor, now)
        return None
    # A result in the tool's error form completes the step all the same (the agent gets
    # the answer), marked a tool error.
    tool_error = tool_error_of(step.tool, outcome.result)
    step.succeed(result=outcome.result, now=now, tool_error=tool_error)
    save_step(step, status_was=StepStatus.RUNNING)
    record_transition(
        actor,
        step,
        StepStatus.RUNNING,
        attempt=step.attempts,
        duration_ms=outcome.duration_ms,
        from_ledger=outcome.from_ledger,
        **tool_error_mark(tool_error),
    )
    run.state = agent_for(run.agent).checkpoint_state(
        run, index=step.index, tool=step.tool, result=outcome.result
    )
    rows.insert(
        [Checkpoint(run_id=run.pk, step_id=step.pk, index=step.index, state=run.state)],
        returning=False,
    )
    save_run(run)
    return advance_locked(run, actor, claim=claim_next, first_open=upcoming)


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
