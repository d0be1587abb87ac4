"""Settling a step whose outcome is unknown: an operator says whether its call took effect.

A step fails with an unknown outcome when its call may or may not have acted (a worker or an
upstream died mid-call, a timeout, a client that cannot tell): agentops never repeats it
unasked, and its run fails. Someone who checked the other side settles it:

- **happened**, with the call's result: the ledger row of its idempotency key is settled
  ``succeeded`` with that result, the step succeeds with it (a checkpoint is written) and the
  run goes on from the next step;
- **did not happen**: the ledger row is settled ``failed`` (so a new attempt may call the tool
  under the same key) and the run is resumed from the step, which runs again.

Both are audited: ``step.succeeded`` and ``run.running``, or ``step.settled`` and the resume,
with ``settled``: who, whether it happened, why.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from agentops.storable import require_storable
from artifacts.services import offload_large_result
from audit.services import audited_atomic
from runs.control.lifecycle import MAX_REASON, run_resume
from runs.executor.advance import advance_locked
from runs.executor.ledger import ledger_settled_by_operator
from runs.executor.outcome import succeed_locked
from runs.models import Run, Step
from runs.statuses import RunStatus, StepStatus
from runs.transitions import lock_run, lock_step, record_event, transition


def outcome_unknown(step: Step) -> bool:
    """Whether ``step`` failed without anyone knowing if its call took effect."""
    error = step.error or {}
    return step.status == StepStatus.FAILED and (
        error.get("type") == "outcome_unknown" or bool(error.get("outcome_unknown"))
    )


def step_settle(
    *,
    run_id: uuid.UUID,
    step_id: int,
    actor: Actor,
    happened: bool,
    result: Any = None,
    reason: str = "",
) -> Run:
    """Settle the unknown outcome of step ``step_id`` of the failed run ``run_id`` (see the
    module docstring); ``result`` (any JSON) is the call's result when it ``happened``;
    ``reason`` says how the operator knows. Returns the run.

    Raises:
        Run.DoesNotExist, Step.DoesNotExist: unknown run, or no such step in it.
        InvalidInput: ``reason`` too long or holding what cannot be stored; a ``result`` given
            for a call that did not happen, or holding what cannot be stored.
        Conflict: the run has not failed, or the step's outcome is not unknown.
    """
    require_storable(reason, field="reason", max_length=MAX_REASON)
    if not happened and result is not None:
        raise InvalidInput("a call that did not happen has no result", field="result")
    require_storable(result, field="result")
    if happened:
        result = offload_large_result(run_id=run_id, step_id=step_id, result=result, actor=actor)
    settled = {"by": actor.name, "happened": happened, "reason": reason}
    if not happened:
        with audited_atomic():
            run, step = _locked(run_id, step_id)
            ledger_settled_by_operator(step, happened=False, result=None, settled=settled)
            record_event(actor, step, "settled", **settled)
        return run_resume(run_id=run_id, actor=actor)
    with audited_atomic():
        run, step = _locked(run_id, step_id)
        ledger_settled_by_operator(step, happened=True, result=result, settled=settled)
        succeed_locked(run, step, result, actor, now=timezone.now(), settled=settled)
        run.finished_at = None
        transition(run, "resume", actor=actor, payload={"settled": settled})
        advance_locked(run, actor)
    return run


def _locked(run_id: uuid.UUID, step_id: int) -> tuple[Run, Step]:
    run = lock_run(run_id)
    if not Step.objects.filter(pk=step_id, run_id=run.pk).exists():
        raise Step.DoesNotExist(f"run {run_id} has no step {step_id}")
    step = lock_step(step_id)
    if run.status != RunStatus.FAILED:
        raise Conflict(f"run is {run.status_info.value}: only a failed run's step is settled")
    if not outcome_unknown(step):
        raise Conflict("this step's outcome is known: there is nothing to settle")
    return run, step
