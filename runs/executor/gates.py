"""The executor's side of the gate protocol (``runs.gates``): stopping a step at its gate and
what happens when the gate is satisfied, refused or cancelled.

Gate kinds call ``gate_satisfied_locked`` and ``gate_refused_locked`` with the run and step
locked (lock order: run, step, then the kind's own rows); nothing here knows any kind.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django_fsm import ConcurrentTransition

from agentops.actors import Actor
from agentops.errors import InvalidInput
from runs import gates
from runs.agents import agent_for
from runs.executor.finish import fail_run_locked
from runs.executor.handover import hand_over_locked
from runs.executor.ledger import ledger_accepted
from runs.executor.outcome import succeed_locked
from runs.models import Executor, Run, Step
from runs.policy import call_refusal
from runs.statuses import OPEN_STEP_STATUSES, StepStatus
from runs.store.writes import step_change, step_change_later
from runs.tools import get_tool, schema_problem
from runs.transitions import lock_steps, record_event, transition
from runs.wakeups import advance_run_on_commit, execute_step_on_commit


def gate_open_locked(run: Run, step: Step, actor: Actor) -> None:
    """Stop a pending step of a running run at its gate: the step moves to waiting, its gate
    kind opens what decides it, and the run moves to waiting."""
    kind = gates.kind(step.gate)
    transition(step, "wait", actor=actor)
    kind.open(run=run, step=step, actor=actor)
    transition(run, "wait", actor=actor, gate=kind.name, payload={"step": step.index})


def gate_hold_result_locked(
    run: Run, step: Step, actor: Actor, *, result: Any, error: dict[str, Any], now: Any
) -> bool:
    """Hold a running step whose ``result`` failed a validator that gates (``error``: its
    rule, path and message) at a gate for a person, result kept: the step policy escalates
    its classification (``StepPolicy.escalate``), the step and run move to waiting and the
    kind opens. Returns False, holding nothing, when no gate kind can (no policy escalates,
    or the step already passed a gate: one gate a step); the caller fails it instead."""
    if step.gate:
        return False
    reason = f"its result failed validation: {error['message']} (at {error['path']})"
    request = gates.StepRequest(step.tool, step.args, declared_risk=step.declared_risk)
    klass = gates.step_policy().escalate(request, gates.Classification(step.risk), reason)
    if klass is None:
        return False
    step_change_later(step.pk, {"gate": klass.gate, "gate_params": klass.params})
    step.gate, step.gate_params = klass.gate, klass.params
    transition(
        step,
        "hold_result",
        actor=actor,
        result=result,
        error=error,
        now=now,
        payload={"error": error},
    )
    kind = gates.kind(step.gate)
    kind.open(run=run, step=step, actor=actor)
    transition(run, "wait", actor=actor, gate=kind.name, payload={"step": step.index})
    return True


def _holds_result(step: Step) -> bool:
    error = step.error or {}
    return step.status == StepStatus.WAITING and error.get("type") == "validation_failed"


def gate_satisfied_locked(*, run: Run, step: Step, actor: Actor) -> None:
    """The gate a waiting step of a waiting run stood at let it through: the step is queued
    (sent to the workers after commit), or made ``ready`` for its client, and the run goes
    on. A step that waited because the run crossed its budget grants the run one more
    allowance (``runs.budget``). A step holding a result that failed validation
    (``gate_hold_result_locked``) succeeds with that result instead: its tool is not called
    again."""
    if _holds_result(step):
        ledger_accepted(step)
        transition(run, "unblock", actor=actor)
        succeed_locked(run, step, step.result, actor, now=timezone.now(), accepted=True)
        advance_run_on_commit(run.pk)
        return
    if step.budget_crossing:
        run.budget_grants += 1
        record_event(actor, run, "budget_granted", grants=run.budget_grants, step=step.index)
    if step.executor == Executor.CLIENT:
        hand_over_locked(step, actor)
    else:
        transition(step, "enqueue", actor=actor)
        execute_step_on_commit(step.pk)
    transition(run, "unblock", actor=actor)


def step_refuse_locked(*, run: Run, step: Step, actor: Actor) -> None:
    """Refuse a pending step of a locked running run before any gate: the step policy found
    it outside the run's grants or denied by a rule (``Step.refusal``). The step ends
    ``refused`` with the refusal as its error, the outcome the agent sees, and its tool is
    never called. Like a gate's refusal, an agent that replans takes it as the call's outcome
    and the run goes on; a fixed plan or a recorded transcript fails with it (its pending
    steps skipped), the step's index and tool added."""
    refusal = step.refusal or {}
    transition(step, "refuse", actor=actor, now=timezone.now(), payload={"error": refusal})
    if agent_for(run.agent).replans_after_refusal:
        return
    error = {**refusal, "step": step.index, "tool": step.tool}
    fail_run_locked(run, actor, error, skip_pending=True)


def gate_refused_locked(*, run: Run, step: Step, actor: Actor, error: dict[str, Any]) -> None:
    """The gate a waiting step stood at refused it: the step ends ``rejected`` with ``error``
    (``{"type": "rejected" | "approval_expired" | ..., "reason": str, "message": str, ...}``),
    the outcome the agent sees.

    An agent that replans (a client app) takes it as the call's outcome: the run goes on and
    is woken to run what the agent appends next. For the others (a fixed plan, a recorded
    transcript, and any compensating run) nothing after the step can run: its pending steps
    are skipped and the run fails with the error, the step's index and tool added (a
    compensating run ends ``compensation_failed``)."""
    transition(
        step, "reject", actor=actor, error=error, now=timezone.now(), payload={"error": error}
    )
    # A refused compensation is not the agent's to replan: what it was to undo stays done.
    if agent_for(run.agent).replans_after_refusal and not run.compensating:
        transition(run, "unblock", actor=actor, payload={"refused": step.index})
        advance_run_on_commit(run.pk)
        return
    fail_run_locked(run, actor, {**error, "step": step.index, "tool": step.tool}, skip_pending=True)


def gate_edit_args_locked(
    *, run: Run, step: Step, actor: Actor, args: Any, reason: str = ""
) -> dict[str, Any]:
    """Replace the arguments of a step waiting at its gate with ``args`` (a person edited
    them; ``reason`` says why): a new ``args_hash`` and idempotency key, so the call is a new
    one to the ledger, and an audit event ``step.args_edited`` that keeps both versions.
    Returns the arguments it replaced.

    Raises:
        InvalidInput: ``args`` is not an object or fails the tool's JSON schema (for a client
            step, the schema its client gave), or the run's policy refuses the call with them
            (``runs.policy.call_refusal``: outside its grants, or a ``deny`` rule).
        ConcurrentTransition: the step is no longer waiting.
    """
    if not isinstance(args, dict):
        raise InvalidInput("args must be an object", field="args")
    tool = get_tool(step.tool)
    if step.executor == Executor.CLIENT:
        problem = schema_problem(step.args_schema, args) if step.args_schema else None
    else:
        problem = tool.validate_args(args) if tool else None
    if problem:
        raise InvalidInput(f"args: {problem}", field="args")
    refused = call_refusal(run, step.tool, args)
    if refused is not None:
        raise InvalidInput(f"args: {refused['message']}", field="args")
    before = {"args": step.args, "idempotency_key": step.idempotency_key}
    digest = Step.args_digest(args)
    key = Step.key_for(run.pk, step.index, step.tool, digest)
    changed = step_change(
        step.pk,
        {"args": args, "args_hash": digest, "idempotency_key": key},
        status=StepStatus.WAITING,
    )
    if changed != 1:
        raise ConcurrentTransition(f"step {step.pk} is no longer waiting")
    step.args, step.args_hash, step.idempotency_key = args, digest, key
    record_event(
        actor,
        step,
        "args_edited",
        **{"from": before, "to": {"args": args, "idempotency_key": key}, "reason": reason},
    )
    return dict(before["args"])


def gate_cancel_locked(*, run: Run, step: Step, actor: Actor) -> None:
    """Close the gate of a waiting step whose run is being cancelled (the caller then cancels
    the step)."""
    gates.kind(step.gate).cancel(run=run, step=step, actor=actor)


def cancel_open_steps(run: Run, actor: Actor, now: Any) -> None:
    """Cancel every open step of a locked run, closing the gate a step waits at."""
    for step in lock_steps(run, OPEN_STEP_STATUSES):
        if step.status == StepStatus.WAITING:
            gate_cancel_locked(run=run, step=step, actor=actor)
        transition(step, "cancel", actor=actor, now=now)
