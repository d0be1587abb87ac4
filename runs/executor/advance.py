"""Moving a run on: start it, stop its next step at its gate, queue (or claim) that step, or
finish the run."""

from __future__ import annotations

from django.utils import timezone

from agentops.actors import Actor
from runs.agents import agent_for
from runs.executor.claim import Claim, claim_locked
from runs.executor.gates import gate_open_locked, step_refuse_locked
from runs.executor.handover import hand_over_locked
from runs.executor.limits import budget_gates_step_locked
from runs.models import Executor, Run, Step
from runs.statuses import OPEN_STEP_STATUSES, RunStatus, StepStatus
from runs.transitions import lock_steps, transition
from runs.wakeups import execute_step_on_commit


def advance_locked(
    run: Run, actor: Actor, *, claim: bool = False, first_open: list[Step] | None = None
) -> Claim | None:
    """Move a locked run on: start it, stop its next step at its gate, queue it (or hand it
    to its client), or finish the run (a compensating run: ``compensated``); a run over its
    budget fails or its next step waits for approval to continue (``runs.executor.limits``),
    but for a compensating step. A step the step policy refused (outside the run's grants, or
    denied by a rule) ends ``refused`` first, before any gate.

    The caller holds the run's row lock inside a transaction. Does nothing while a step is in
    flight (waiting at a gate, queued, running or waiting to retry) or the run is not active.
    A queued step is sent to the workers after commit; with ``claim`` (the caller is a worker
    that will execute it) it is claimed for ``actor`` in this transaction instead and the
    claim returned, which spares a commit and a broker round trip per step. ``first_open``
    is the run's first open step (``[]``: none), when the caller has already locked it.
    """
    if run.status == RunStatus.QUEUED:
        run.started_at = timezone.now()
        transition(run, "start", actor=actor)
    if run.status != RunStatus.RUNNING:
        return None
    # Steps run in index order, so the first open step is in flight or the next to start.
    found = lock_steps(run, OPEN_STEP_STATUSES, limit=1) if first_open is None else first_open
    step = found[0] if found else None
    if step is not None and step.status != StepStatus.PENDING:
        return None
    if step is None:
        if run.compensating:
            # Its last compensating step succeeded: every compensable effect is undone.
            run.finished_at = timezone.now()
            transition(run, "finish_compensation", actor=actor)
        elif agent_for(run.agent).is_finished(run):
            run.finished_at = timezone.now()
            transition(run, "succeed", actor=actor)
        return None
    if step.refusal is not None:
        # Refused before any gate (a budget's included): the next step may go on at once.
        step_refuse_locked(run=run, step=step, actor=actor)
        return advance_locked(run, actor, claim=claim)
    # Undoing what a run did is not held to the budget it may have crossed doing it.
    if step.compensates_id is None and budget_gates_step_locked(run, step, actor):
        return None
    if step.gate:
        gate_open_locked(run, step, actor)
        return None
    if step.executor == Executor.CLIENT:
        hand_over_locked(step, actor)
        return None
    if claim:
        # Queued and claimed in one transaction: one write of the row for both transitions.
        status_was = transition(step, "enqueue", actor=actor, save=False)
        return claim_locked(run, step, actor, status_was=status_was)
    transition(step, "enqueue", actor=actor)
    execute_step_on_commit(step.pk)
    return None
