"""Every change to runs and steps.

Each public function is one transaction that locks what it changes, calls FSM transitions,
saves, writes one audit event per transition and registers work for after the commit
(enqueueing Celery tasks; live events go out through ``audit_record``); the executor's
(``step_execute``, ``run_advance(execute=True)``) are a chain of them, with each tool called
between two: nothing outside the database happens inside a transaction. Rows the executor
reads and writes on every step go through ``agentops.rows`` (plain SQL), the rest through the
ORM.

Lock order, everywhere, to rule out deadlocks: the run row, then its step rows, then the
approval row, then the audit chain's advisory lock (taken inside ``audit_record``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from agentops import rows
from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from approvals.policy import Classification, classify, load_rules
from audit.models import AuditEvent
from audit.selectors import audit_chains_expired
from audit.services import audit_purge_chains, audit_record, audited_atomic
from runs.agents import StepSpec, agent_for
from runs.agents.base import parse_step_list
from runs.execution import Outcome, backoff_seconds, call_tool, structured_error
from runs.models import (
    STEP_IN_FLIGHT,
    AgentKind,
    AttemptStatus,
    CallStatus,
    Checkpoint,
    RetentionAction,
    RetentionPolicy,
    Run,
    RunStatus,
    Step,
    StepAttempt,
    StepStatus,
    ToolCall,
)
from runs.tools import ToolContext, get_tool

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Helpers shared by the services of this app and of ``approvals``


def args_hash(args: dict[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON (sorted keys, no spaces) of ``args``."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def lock_run(run_id: uuid.UUID | str) -> Run:
    """The run row, locked until the transaction ends (``SELECT ... FOR UPDATE``).

    Raises:
        Run.DoesNotExist: unknown id.
    """
    return rows.get(Run, run_id, lock=True)


def lock_run_of_step(step_id: int) -> Run | None:
    """The run of step ``step_id``, locked like ``lock_run`` (one query), or None when there
    is no such step. Lock the step itself afterwards: runs are always locked first."""
    found = rows.select(
        Run, "id = (SELECT run_id FROM runs_step WHERE id = %s)", [step_id], lock=True
    )
    return found[0] if found else None


def lock_step(step_id: int) -> Step:
    """The step row, locked until the transaction ends; lock its run first.

    Raises:
        Step.DoesNotExist: unknown id.
    """
    return rows.get(Step, step_id, lock=True)


def record_transition(actor: Actor, obj: Any, from_state: str, **payload: Any) -> None:
    """Write the audit event of one transition of a run, step or approval request.

    The verb is ``<object type>.<new status>`` (``step.succeeded``); creation is recorded with
    ``from_state`` empty.
    """
    object_type = obj._meta.model_name
    if object_type == "approvalrequest":
        object_type = "approval"
    run_id = obj.pk if object_type == "run" else obj.run_id
    audit_record(
        actor=actor,
        verb=f"{object_type}.{obj.status}" if from_state else f"{object_type}.created",
        object_type=object_type,
        object_id=obj.pk,
        run_id=run_id,
        from_state=from_state,
        to_state=obj.status,
        payload=payload,
    )


# The columns of a run and of a step that change after creation (the rest never do).
_RUN_CHANGING = [
    "status",
    "version",
    "error",
    "client_done",
    "state",
    "usage_tokens",
    "cost_usd",
    "duration_ms",
    "started_at",
    "finished_at",
]
_STEP_CHANGING = [
    "status",
    "attempts",
    "max_attempts",
    "next_attempt_at",
    "lease_owner",
    "lease_expires_at",
    "result",
    "error",
    "started_at",
    "finished_at",
]


def save_run(run: Run) -> None:
    """Write what changed in a locked run and bump its ``version``.

    Raises:
        ConcurrentTransition: the row's version is not the one it was read with.
    """
    read_version = run.version
    run.version += 1
    rows.update(run, _RUN_CHANGING, guard={"version": read_version})


def save_step(step: Step, *, status_was: str) -> None:
    """Write what changed in a locked step that had status ``status_was`` when read.

    Raises:
        ConcurrentTransition: the row's status is no longer ``status_was``.
    """
    rows.update(step, _STEP_CHANGING, guard={"status": status_was})


def enqueue_step_on_commit(step_id: int) -> None:
    """Send ``execute_step(step_id)`` to the workers once the transaction commits."""
    from runs.tasks import execute_step

    transaction.on_commit(lambda: execute_step.delay(step_id))


def enqueue_advance_on_commit(run_id: uuid.UUID) -> None:
    """Send ``advance_run(run_id)`` to the workers once the transaction commits."""
    from runs.tasks import advance_run

    transaction.on_commit(lambda: advance_run.delay(str(run_id)))


# ---------------------------------------------------------------------------------------------
# Creating runs and steps


def _validate_spec(spec: StepSpec, *, where: str, registered_only: bool) -> None:
    tool = get_tool(spec.tool)
    if tool is None:
        if registered_only:
            raise InvalidInput(f"{where}.tool: unknown tool {spec.tool!r}", field=f"{where}.tool")
        return
    reason = tool.validate_args(spec.args)
    if reason:
        raise InvalidInput(f"{where}.args: {reason}", field=f"{where}.args")


def _new_step(run: Run, spec: StepSpec, *, index: int, klass: Classification) -> Step:
    """An unsaved pending step of ``run`` at ``index``, classified as ``klass``."""
    tool = get_tool(spec.tool)
    digest = args_hash(spec.args)
    return Step(
        run=run,
        index=index,
        tool=spec.tool,
        args=spec.args,
        args_hash=digest,
        idempotency_key=f"{run.pk}:{index}:{spec.tool}:{digest}",
        risk=klass.risk,
        required_approvals=klass.required_approvals,
        rationale=spec.rationale,
        tool_call_id=spec.tool_call_id,
        recorded_result=spec.recorded_result,
        max_attempts=tool.max_attempts if tool else settings.AGENTOPS_DEFAULT_MAX_ATTEMPTS,
        timeout_seconds=(
            tool.timeout_seconds if tool else settings.AGENTOPS_DEFAULT_STEP_TIMEOUT_SECONDS
        ),
    )


def _insert_steps(steps: list[Step], actor: Actor) -> list[Step]:
    """Insert new steps in one statement and record their creation."""
    rows.insert(steps)
    for step in steps:
        record_transition(actor, step, "", tool=step.tool, risk=step.risk, index=step.index)
    return steps


def _create_steps(run: Run, specs: list[StepSpec], *, first_index: int, actor: Actor) -> list[Step]:
    rules = load_rules()
    steps = [
        _new_step(run, spec, index=first_index + i, klass=classify(spec.tool, rules=rules))
        for i, spec in enumerate(specs)
    ]
    return _insert_steps(steps, actor)


def run_create(
    *,
    actor: Actor,
    agent: str,
    goal: str,
    steps: Any = None,
    transcript: Any = None,
    metadata: Any = None,
    step_limit: int | None = None,
    deadline: Any = None,
) -> Run:
    """Create a queued run with its initial steps and start it after commit.

    ``agent`` is plan, client or transcript; ``steps`` a list of ``{"tool", "args",
    "rationale"?}`` (plan, client); ``transcript`` an OpenAI chat message list (transcript);
    ``metadata`` a JSON object kept as is; ``step_limit`` caps the steps (default
    ``AGENTOPS_DEFAULT_STEP_LIMIT``); ``deadline`` an aware datetime.

    Raises:
        InvalidInput: any part is malformed: unknown agent or tool, arguments that fail the
            tool's schema, a transcript that does not parse, more steps than the limit.
    """
    if not isinstance(goal, str) or not goal.strip():
        raise InvalidInput("goal must be a non-empty string", field="goal")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object", field="metadata")
    handler = agent_for(agent)
    prepared = handler.prepare({"steps": steps, "transcript": transcript})
    for i, spec in enumerate(prepared.steps):
        _validate_spec(spec, where=f"steps[{i}]", registered_only=handler.needs_registered_tools)
    limit = step_limit or settings.AGENTOPS_DEFAULT_STEP_LIMIT
    if len(prepared.steps) > limit:
        raise InvalidInput(
            f"{len(prepared.steps)} steps exceed the step limit of {limit}", field="steps"
        )
    with audited_atomic():
        run = Run.objects.create(
            goal=goal,
            agent=agent,
            input=prepared.input,
            metadata=metadata,
            conversation=prepared.conversation,
            requested_by=actor.user,
            step_limit=limit,
            deadline=deadline,
        )
        record_transition(actor, run, "", agent=agent, goal=goal)
        _create_steps(run, prepared.steps, first_index=0, actor=actor)
        enqueue_advance_on_commit(run.pk)
    return run


def step_append(
    *, actor: Actor, run_id: uuid.UUID, tool: str, args: Any, rationale: str = ""
) -> Step:
    """Append one step to a client run; it runs when the steps before it are done.

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: unknown tool or arguments that fail its schema; not a client run.
        Conflict: the run is finished, or its client already completed it.
    """
    specs = parse_step_list(
        [{"tool": tool, "args": args, "rationale": rationale}], field_name="step"
    )
    _validate_spec(specs[0], where="step", registered_only=True)
    with audited_atomic():
        run = lock_run(run_id)
        if run.agent != "client":
            raise InvalidInput(f"steps can only be appended to client runs, not {run.agent} runs")
        if run.is_terminal:
            raise Conflict(f"run is {run.status}: no more steps can be appended")
        if run.client_done:
            raise Conflict("the client already completed this run")
        count = run.steps.count()
        if count >= run.step_limit:
            raise Conflict(f"run reached its step limit of {run.step_limit}")
        (step,) = _create_steps(run, specs, first_index=count, actor=actor)
        save_run(run)
        enqueue_advance_on_commit(run.pk)
    return step


# ---------------------------------------------------------------------------------------------
# Advancing a run


_OPEN_STEP_STATUSES = [StepStatus.PENDING, *STEP_IN_FLIGHT]


def fail_run_locked(run: Run, actor: Actor, error: dict[str, Any]) -> None:
    """Fail a locked run (running or awaiting approval) with the structured ``error``."""
    from_state = run.status
    run.fail(error=error)
    run.finished_at = timezone.now()
    save_run(run)
    record_transition(actor, run, from_state, error=error)


def skip_pending_locked(run: Run, actor: Actor) -> None:
    """Skip every pending step of a locked run: the run ended before reaching them."""
    for step in _lock_steps(run, [StepStatus.PENDING]):
        step.skip()
        save_step(step, status_was=StepStatus.PENDING)
        record_transition(actor, step, StepStatus.PENDING)


def _lock_steps(run: Run, statuses: Sequence[str], *, limit: int | None = None) -> list[Step]:
    """The steps of a locked run that have one of ``statuses``, in index order, locked."""
    marks = ", ".join(["%s"] * len(statuses))
    return rows.select(
        Step,
        f"run_id = %s AND status IN ({marks})",
        [run.pk, *statuses],
        lock=True,
        order_by='"index"',
        limit=limit,
    )


def advance_locked(run: Run, actor: Actor, *, claim: bool = False) -> _Claim | None:
    """Move a locked run on: start it, open an approval or queue its next step, or finish it.

    The caller holds the run's row lock inside a transaction. Does nothing while a step is in
    flight (awaiting approval, queued, running or waiting to retry) or the run is not active.
    A queued step is sent to the workers after commit; with ``claim`` (the caller is a worker
    that will execute it) it is claimed for ``actor`` in this transaction instead and the
    claim returned, which spares a commit and a broker round trip per step.
    """
    from approvals.services import approval_open_locked

    if run.status == RunStatus.QUEUED:
        run.start()
        run.started_at = timezone.now()
        save_run(run)
        record_transition(actor, run, RunStatus.QUEUED)
    if run.status != RunStatus.RUNNING:
        return None
    if run.deadline and timezone.now() >= run.deadline:
        skip_pending_locked(run, actor)
        fail_run_locked(
            run, actor, {"type": "deadline_exceeded", "message": "the run's deadline passed"}
        )
        return None
    # Steps run in index order, so the first open step is in flight or the next to start.
    found = _lock_steps(run, _OPEN_STEP_STATUSES, limit=1)
    step = found[0] if found else None
    if step is not None and step.status != StepStatus.PENDING:
        return None
    if step is None:
        if agent_for(run.agent).is_finished(run):
            run.succeed()
            run.finished_at = timezone.now()
            save_run(run)
            record_transition(actor, run, RunStatus.RUNNING)
        return None
    if step.required_approvals:
        step.request_approval()
        save_step(step, status_was=StepStatus.PENDING)
        record_transition(actor, step, StepStatus.PENDING)
        approval_open_locked(run=run, step=step, actor=actor)
        run.await_approval()
        save_run(run)
        record_transition(actor, run, RunStatus.RUNNING, step=step.index)
        return None
    step.enqueue()
    record_transition(actor, step, StepStatus.PENDING)
    if claim:
        # Queued and claimed in one transaction: one write of the row for both transitions.
        return _claim_locked(run, step, actor, status_was=StepStatus.PENDING)
    save_step(step, status_was=StepStatus.PENDING)
    enqueue_step_on_commit(step.pk)
    return None


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


def run_complete(*, run_id: uuid.UUID, actor: Actor) -> Run:
    """A client app says it appends no more steps; the run succeeds once its steps are done.

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: not a client run.
        Conflict: the run is already finished or completed.
    """
    with audited_atomic():
        run = lock_run(run_id)
        if run.agent != "client":
            raise InvalidInput(f"only client runs are completed by their client, not {run.agent}")
        if run.is_terminal:
            raise Conflict(f"run is already {run.status}")
        if run.client_done:
            raise Conflict("the client already completed this run")
        run.client_done = True
        save_run(run)
        audit_record(
            actor=actor,
            verb="run.client_completed",
            object_type="run",
            object_id=run.pk,
            run_id=run.pk,
            from_state=run.status,
            to_state=run.status,
        )
        advance_locked(run, actor)
    return run


def _cancel_open_steps(run: Run, actor: Actor, now: Any) -> None:
    """Cancel every open step of a locked run, and the approval a step waits on."""
    from approvals.services import approval_cancel_locked

    for step in _lock_steps(run, _OPEN_STEP_STATUSES):
        from_state = step.status
        if from_state == StepStatus.AWAITING_APPROVAL:
            approval_cancel_locked(step=step, actor=actor)
        step.cancel(now=now)
        save_step(step, status_was=from_state)
        record_transition(actor, step, from_state)


def run_cancel(*, run_id: uuid.UUID, actor: Actor, reason: str = "") -> Run:
    """Cancel a run and every step and approval still open.

    A step that is running when the run is cancelled finishes on its worker, but its outcome
    no longer moves the run (``step_execute`` sees the step cancelled).

    Raises:
        Run.DoesNotExist: unknown run.
        TransitionNotAllowed: the run is already succeeded, failed or cancelled.
    """
    with audited_atomic():
        run = lock_run(run_id)
        from_state = run.status
        error = {"type": "cancelled", "message": reason or "cancelled", "by": actor.name}
        run.cancel(error=error)
        now = timezone.now()
        run.finished_at = now
        save_run(run)
        record_transition(actor, run, from_state, reason=reason)
        _cancel_open_steps(run, actor, now)
    return run


def run_resume(*, run_id: uuid.UUID, actor: Actor) -> Run:
    """Continue a failed run from its failed step; steps that succeeded are not run again.

    The failed step is queued again with fresh attempts (its earlier attempts are kept).

    Raises:
        Run.DoesNotExist: unknown run.
        TransitionNotAllowed: the run is not failed.
        Conflict: a reviewer rejected the step the run failed on (fork the run instead).
    """
    with audited_atomic():
        run = lock_run(run_id)
        last = run.steps.select_for_update().exclude(status=StepStatus.PENDING).order_by("-index")
        failed = last.first()
        if failed is not None and failed.status == StepStatus.REJECTED:
            raise Conflict("a reviewer rejected this run's step: it cannot be resumed")
        run.resume()
        run.finished_at = None
        save_run(run)
        record_transition(actor, run, RunStatus.FAILED)
        if failed is not None and failed.status == StepStatus.FAILED:
            failed.retry()
            save_step(failed, status_was=StepStatus.FAILED)
            record_transition(actor, failed, StepStatus.FAILED)
            enqueue_step_on_commit(failed.pk)
        else:
            advance_locked(run, actor)
    return run


def run_fork(
    *, run_id: uuid.UUID, actor: Actor, from_index: int, args: dict[str, Any] | None = None
) -> Run:
    """Start a new run from the checkpoint before step ``from_index`` of run ``run_id``.

    Steps ``0 .. from_index-1`` must have succeeded: the new run gets them as succeeded steps
    with their recorded results and checkpoints (no tool is called again), and starts with the
    state of the checkpoint before ``from_index``. The source's later steps are copied as
    pending (plan and transcript runs; a client run's client appends its own), the first of
    them with ``args`` instead of its arguments when given: edited arguments get a new
    idempotency key and always need a reviewer's approval. The new run's metadata names its
    source (``forked_from``).

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: ``from_index`` out of range or past a step that did not succeed;
            ``args`` not an object or failing the tool's schema; ``args`` with nothing to edit.
    """
    source = Run.objects.get(pk=run_id)
    steps = list(source.steps.order_by("index"))
    if not isinstance(from_index, int) or not 0 <= from_index <= len(steps):
        raise InvalidInput(f"from_index must be between 0 and {len(steps)}", field="from_index")
    not_done = [s.index for s in steps[:from_index] if s.status != StepStatus.SUCCEEDED]
    if not_done:
        raise InvalidInput(
            f"step {not_done[0]} did not succeed: fork from index {not_done[0]} or earlier",
            field="from_index",
        )
    later = steps[from_index:] if source.agent != AgentKind.CLIENT else []
    if args is not None:
        if not later:
            raise InvalidInput("there is no step at from_index whose args could be edited")
        if not isinstance(args, dict):
            raise InvalidInput("args must be an object", field="args")
        tool = get_tool(later[0].tool)
        reason = tool.validate_args(args) if tool else None
        if reason:
            raise InvalidInput(f"args: {reason}", field="args")
    checkpoints = {c.index: c.state for c in source.checkpoints.filter(index__lt=from_index)}
    with audited_atomic():
        run = Run.objects.create(
            goal=source.goal,
            agent=source.agent,
            input=source.input,
            metadata={
                **source.metadata,
                "forked_from": {"run": str(source.pk), "index": from_index},
            },
            conversation=source.conversation,
            requested_by=actor.user,
            step_limit=source.step_limit,
            state=checkpoints.get(from_index - 1, {}),
        )
        record_transition(
            actor, run, "", agent=run.agent, forked_from=str(source.pk), from_index=from_index
        )
        for old in steps[:from_index]:
            step = Step.objects.create(
                run=run,
                index=old.index,
                tool=old.tool,
                args=old.args,
                args_hash=old.args_hash,
                idempotency_key=f"{run.pk}:{old.index}:{old.tool}:{old.args_hash}",
                risk=old.risk,
                required_approvals=old.required_approvals,
                rationale=old.rationale,
                tool_call_id=old.tool_call_id,
                recorded_result=old.recorded_result,
                status=StepStatus.SUCCEEDED,
                result=old.result,
                max_attempts=old.max_attempts,
                timeout_seconds=old.timeout_seconds,
            )
            record_transition(actor, step, "", reused_from_step=old.pk, index=old.index)
            Checkpoint.objects.create(
                run=run, step=step, index=step.index, state=checkpoints.get(old.index, {})
            )
        rules = load_rules()
        pending = []
        for position, old in enumerate(later):
            new_args = args if position == 0 and args is not None else None
            edited = new_args is not None
            spec = StepSpec(
                tool=old.tool,
                args=new_args if new_args is not None else old.args,
                rationale=old.rationale,
                tool_call_id=old.tool_call_id,
                recorded_result=old.recorded_result,
            )
            klass = classify(old.tool, rules=rules)
            if edited:
                klass = Classification(klass.risk, max(1, klass.required_approvals))
            pending.append(_new_step(run, spec, index=old.index, klass=klass))
        _insert_steps(pending, actor)
        enqueue_advance_on_commit(run.pk)
    return run


# ---------------------------------------------------------------------------------------------
# Executing a step


@dataclass
class _Claim:
    """A claimed step and how to get its outcome: ``call`` the tool, ``replay`` the recorded
    output, take the ``ledger``'s recorded result, or refuse a repeat whose outcome is
    ``unknown``."""

    step: Step
    plan: str
    ledger_result: Any = None


def _ledger_plan(run: Run, step: Step, now: Any) -> tuple[str, Any]:
    """Open (or re-open) the ledger row of the step's idempotency key; say how to proceed."""
    fields = {
        "run": run,
        "step": step,
        "tool": step.tool,
        "status": CallStatus.STARTED,
        "attempt": step.attempts,
        "started_at": now,
    }
    if step.attempts == 1:
        # The key names this step and its arguments: no earlier attempt can have opened it.
        rows.insert([ToolCall(idempotency_key=step.idempotency_key, **fields)])
        return ("replay" if run.agent == AgentKind.TRANSCRIPT else "call"), None
    call, created = ToolCall.objects.select_for_update().get_or_create(
        idempotency_key=step.idempotency_key, defaults=fields
    )
    replay = run.agent == AgentKind.TRANSCRIPT
    if not created:
        if call.status == CallStatus.SUCCEEDED:
            return "ledger", call.result
        tool = get_tool(step.tool)
        if call.status == CallStatus.STARTED and not replay and tool and not tool.safe_to_repeat:
            return "unknown", None
        call.status, call.attempt, call.started_at, call.finished_at = (
            CallStatus.STARTED,
            step.attempts,
            now,
            None,
        )
        call.save()
    return ("replay" if replay else "call"), None


def _claim_locked(
    run: Run, step: Step, actor: Actor, *, status_was: str = StepStatus.QUEUED
) -> _Claim:
    """Claim a queued step of a running run for ``actor`` (both locked by the caller):
    queued → running under a lease, its attempt row, its ledger row opened. ``status_was``
    is the status of the step's row (pending when it was queued in this transaction)."""
    now = timezone.now()
    # Lease: the step's timeout plus a margin for recording the outcome; a heartbeat extends
    # it. Past it, the sweeper takes the worker for dead.
    lease = now + timedelta(seconds=step.timeout_seconds + settings.AGENTOPS_LEASE_MARGIN_SECONDS)
    step.claim(owner=actor.id, lease_expires_at=lease, now=now)
    save_step(step, status_was=status_was)
    rows.insert(
        [
            StepAttempt(
                step=step,
                number=step.attempts,
                status=AttemptStatus.RUNNING,
                worker=actor.id,
                started_at=now,
            )
        ]
    )
    plan, ledger_result = _ledger_plan(run, step, now)
    record_transition(actor, step, StepStatus.QUEUED, attempt=step.attempts)
    return _Claim(step, plan, ledger_result)


def _claim(step_id: int, actor: Actor) -> _Claim | None:
    with audited_atomic():
        run = lock_run_of_step(step_id)
        if run is None:
            return None
        step = lock_step(step_id)
        # A duplicate or late message finds the step no longer queued: nothing to do.
        if step.status != StepStatus.QUEUED or run.status != RunStatus.RUNNING:
            return None
        return _claim_locked(run, step, actor)


def step_heartbeat(*, step_id: int, owner: str, extend_seconds: int) -> bool:
    """Extend the lease of a running step held by ``owner`` to now + ``extend_seconds``.

    Returns False when the lease is no longer ``owner``'s (the step was cancelled or recovered):
    the tool should stop. One conditional UPDATE, no lock held.
    """
    lease = timezone.now() + timedelta(seconds=extend_seconds)
    updated = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, lease_owner=owner).update(
        lease_expires_at=lease
    )
    return updated == 1


def _outcome_of(claim: _Claim, actor: Actor) -> Outcome:
    step = claim.step
    if claim.plan == "ledger":
        return Outcome(True, claim.ledger_result, from_ledger=True)
    if claim.plan == "unknown":
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
    if claim.plan == "replay":
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
    return call_tool(tool, step.args, ctx)


def _settle_ledger(claim: _Claim, outcome: Outcome, now: Any) -> None:
    """Record the call's outcome in the ledger; an unknown outcome stays ``started``.

    Only while the row still belongs to this attempt: a late attempt (its lease expired and a
    later attempt re-opened the row) must not overwrite what the later attempt records.
    """
    if claim.plan not in ("call", "replay") or outcome.effect_unknown:
        return
    rows.update_where(
        ToolCall,
        {
            "status": CallStatus.SUCCEEDED if outcome.ok else CallStatus.FAILED,
            "result": outcome.result if outcome.ok else None,
            "duration_ms": outcome.duration_ms,
            "finished_at": now,
        },
        {"idempotency_key": claim.step.idempotency_key, "attempt": claim.step.attempts},
    )


def _fail_or_retry(run: Run, step: Step, error: dict[str, Any], actor: Actor, now: Any) -> None:
    """After a failed attempt of a locked step: wait to retry when the error is retryable and
    attempts remain, else fail the step and the run."""
    if error.get("retryable") and step.attempts < step.max_attempts:
        delay = backoff_seconds(step.attempts)
        step.schedule_retry(error=error, next_attempt_at=now + timedelta(seconds=delay), now=now)
        save_step(step, status_was=StepStatus.RUNNING)
        record_transition(actor, step, StepStatus.RUNNING, error=error, retry_in_s=delay)
        save_run(run)
        _retry_on_commit(step.pk, delay)
        return
    step.fail(error=error, now=now)
    save_step(step, status_was=StepStatus.RUNNING)
    record_transition(actor, step, StepStatus.RUNNING, error=error)
    fail_run_locked(run, actor, {**error, "step": step.index, "tool": step.tool})


def _record_outcome(
    claim: _Claim, outcome: Outcome, actor: Actor, *, claim_next: bool = False
) -> _Claim | None:
    """Record one attempt's outcome and advance the run (one transaction); with
    ``claim_next``, claim the run's next step for ``actor`` if it can run at once."""
    with audited_atomic():
        run = lock_run(claim.step.run_id)
        step = lock_step(claim.step.pk)
        now = timezone.now()
        _settle_ledger(claim, outcome, now)
        rows.update_where(
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
            _fail_or_retry(run, step, outcome.error or {}, actor, now)
            return None
        step.succeed(result=outcome.result, now=now)
        save_step(step, status_was=StepStatus.RUNNING)
        record_transition(
            actor,
            step,
            StepStatus.RUNNING,
            attempt=step.attempts,
            duration_ms=outcome.duration_ms,
            from_ledger=outcome.from_ledger,
        )
        run.state = agent_for(run.agent).checkpoint_state(
            run, index=step.index, tool=step.tool, result=outcome.result
        )
        rows.insert([Checkpoint(run=run, step=step, index=step.index, state=run.state)])
        save_run(run)
        return advance_locked(run, actor, claim=claim_next)


def _retry_on_commit(step_id: int, delay: float) -> None:
    from runs.tasks import retry_step

    transaction.on_commit(lambda: retry_step.apply_async((step_id,), countdown=delay))


def _record_with_retries(
    claim: _Claim, outcome: Outcome, actor: Actor, *, claim_next: bool
) -> _Claim | None:
    # The outcome is known only in this process: losing it to a dropped database connection
    # would leave the call's outcome unknown. Retry recording on a fresh connection.
    for retry in range(RECORD_RETRIES + 1):
        try:
            return _record_outcome(claim, outcome, actor, claim_next=claim_next)
        except (OperationalError, InterfaceError):
            if retry == RECORD_RETRIES:
                raise
            logger.warning(
                "lost the database connection recording step %s; retrying", claim.step.pk
            )
            connection.close()
            time.sleep(0.5 * (retry + 1))
    return None


RECORD_RETRIES = 3


def execute_claims(claim: _Claim | None, actor: Actor) -> None:
    """Execute a claimed step, then each next step of its run that the recording transaction
    claims for this worker, for up to ``AGENTOPS_CLAIM_NEXT_SECONDS`` seconds; a step queued
    after that is sent through the broker, so one long run does not keep a worker from the
    others."""
    until = time.monotonic() + settings.AGENTOPS_CLAIM_NEXT_SECONDS
    while claim is not None:
        outcome = _outcome_of(claim, actor)
        claim = _record_with_retries(claim, outcome, actor, claim_next=time.monotonic() < until)


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
    execute_claims(_claim(step_id, actor), actor)


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
        now = timezone.now()
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
        call = ToolCall.objects.filter(idempotency_key=step.idempotency_key).first()
        tool = get_tool(step.tool)
        if (
            call is not None
            and call.status == CallStatus.STARTED
            and run.agent != AgentKind.TRANSCRIPT
            and tool is not None
            and not tool.safe_to_repeat
        ):
            error = {
                **error,
                "type": "outcome_unknown",
                "retryable": False,
                "message": error["message"] + "; the call may have taken effect and "
                f"{step.tool} is not idempotent: not repeated",
            }
        _fail_or_retry(run, step, error, actor, now)
    return True


def step_retry_due(*, step_id: int, actor: Actor) -> bool:
    """Queue a step waiting to retry once its ``next_attempt_at`` has come.

    Returns True when the step was queued (the caller then executes it).
    """
    with audited_atomic():
        run = lock_run_of_step(step_id)
        if run is None:
            return False
        step = lock_step(step_id)
        if step.status != StepStatus.WAITING_RETRY or run.status != RunStatus.RUNNING:
            return False
        if step.next_attempt_at and step.next_attempt_at > timezone.now() + timedelta(seconds=1):
            return False
        step.enqueue()
        save_step(step, status_was=StepStatus.WAITING_RETRY)
        record_transition(actor, step, StepStatus.WAITING_RETRY)
    return True


def sweep(*, actor: Actor) -> dict[str, int]:
    """Recover what lost messages and crashes leave behind; run periodically by Celery beat.

    Recovers running steps whose lease expired (``step_recover_lost``); re-sends due retries,
    queued steps and stalled runs whose message may be lost (unchanged for longer than
    ``AGENTOPS_REQUEUE_AFTER_SECONDS``: a run still queued, or running with nothing in flight
    but something to do), a step at most once per that period; expires approvals past
    ``expires_at``, fails runs past their deadline and forgets expired ``Idempotency-Key``s.
    Returns counts by kind.
    """
    from approvals.services import approval_expire_due
    from runs.idempotency import idempotency_keys_purge

    now = timezone.now()
    stale = now - timedelta(seconds=settings.AGENTOPS_REQUEUE_AFTER_SECONDS)
    counts = {
        "lost": 0,
        "retries": 0,
        "queued": 0,
        "stalled_runs": 0,
        "expired_approvals": 0,
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
        _retry_on_commit(step_id, 0)
        counts["retries"] += 1
    for step_id in queued_ids:
        enqueue_step_on_commit(step_id)
        counts["queued"] += 1
    stalled = (
        Run.objects.filter(updated_at__lte=stale)
        .filter(
            Q(status=RunStatus.QUEUED)
            | Q(status=RunStatus.RUNNING)
            & (
                Q(steps__status=StepStatus.PENDING)
                | ~Q(agent=AgentKind.CLIENT)
                | Q(client_done=True)
            )
        )
        .exclude(steps__status__in=STEP_IN_FLIGHT)
        .distinct()
    )
    for run_id in stalled.values_list("pk", flat=True):
        enqueue_advance_on_commit(run_id)
        counts["stalled_runs"] += 1
    counts["expired_approvals"] = approval_expire_due(actor=actor)
    counts["idempotency_keys_purged"] = idempotency_keys_purge()
    for run_id in Run.objects.filter(
        status__in=[RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL, RunStatus.QUEUED],
        deadline__lte=now,
    ).values_list("pk", flat=True):
        with audited_atomic():
            run = lock_run(run_id)
            if run.is_terminal:
                continue
            if run.status == RunStatus.QUEUED:
                run_cancel(run_id=run.pk, actor=actor, reason="deadline passed before it started")
            else:
                _cancel_open_steps(run, actor, now)
                fail_run_locked(
                    run,
                    actor,
                    {"type": "deadline_exceeded", "message": "the run's deadline passed"},
                )
        counts["deadlines"] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# Retention

# Runs handled per chunk.
_RETENTION_RUN_CHUNK = 500
# One batch of steps and every row hanging off them, in one statement (one round trip): the
# statements of a WITH share a snapshot, and Django's foreign keys are checked at commit
# (DEFERRABLE INITIALLY DEFERRED), so children and parents may go together.
_DELETE_STEP_BATCH = """
WITH batch AS (SELECT id FROM runs_step WHERE run_id = ANY(%s) LIMIT %s),
approvals AS (
    DELETE FROM approvals_approvalrequest WHERE step_id IN (SELECT id FROM batch) RETURNING id
),
decisions AS (
    DELETE FROM approvals_approvaldecision WHERE approval_id IN (SELECT id FROM approvals)
),
checkpoints AS (DELETE FROM runs_checkpoint WHERE step_id IN (SELECT id FROM batch)),
attempts AS (DELETE FROM runs_stepattempt WHERE step_id IN (SELECT id FROM batch)),
calls AS (DELETE FROM runs_toolcall WHERE step_id IN (SELECT id FROM batch))
DELETE FROM runs_step WHERE id IN (SELECT id FROM batch)
"""


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
            cursor.execute(_DELETE_STEP_BATCH, [run_ids, batch_size])
            deleted = cursor.rowcount
        _timed_batch(report, started)
        report.steps += deleted
        if deleted < batch_size:
            break
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_approvalrequest WHERE run_id = ANY(%s)", [run_ids])
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
        report.audit_events, longest = audit_purge_chains(chains=expired_chains, batch_size=batch)
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
