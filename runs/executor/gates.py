"""The executor's side of the gate protocol (``runs.gates``): stopping a step at its gate and
what happens when the gate is satisfied, refused or cancelled.

Gate kinds call ``gate_satisfied_locked`` and ``gate_refused_locked`` with the run and step
locked (lock order: run, step, then the kind's own rows); nothing here knows any kind.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from runs import gates
from runs.agents import agent_for
from runs.executor.finish import fail_run_locked, skip_pending_locked
from runs.models import Run, Step
from runs.statuses import RunStatus, StepStatus
from runs.transitions import record_transition, save_run, save_step
from runs.wakeups import advance_run_on_commit, execute_step_on_commit


def gate_open_locked(run: Run, step: Step, actor: Actor) -> None:
    """Stop a pending step of a running run at its gate: the step moves to waiting, its gate
    kind opens what decides it, and the run moves to waiting."""
    kind = gates.kind(step.gate)
    step.wait()
    save_step(step, status_was=StepStatus.PENDING)
    record_transition(actor, step, StepStatus.PENDING)
    kind.open(run=run, step=step, actor=actor)
    run.wait(gate=kind.name)
    save_run(run)
    record_transition(actor, run, RunStatus.RUNNING, step=step.index)


def gate_satisfied_locked(*, run: Run, step: Step, actor: Actor) -> None:
    """The gate a waiting step of a waiting run stood at let it through: the step is queued
    (sent to the workers after commit) and the run goes on."""
    step.enqueue()
    save_step(step, status_was=StepStatus.WAITING)
    record_transition(actor, step, StepStatus.WAITING)
    from_gate = run.gate
    run.unblock()
    save_run(run)
    record_transition(actor, run, RunStatus.WAITING, from_gate=from_gate)
    execute_step_on_commit(step.pk)


def gate_refused_locked(*, run: Run, step: Step, actor: Actor, error: dict[str, Any]) -> None:
    """The gate a waiting step stood at refused it: the step ends ``rejected`` with ``error``
    (``{"type": "rejected" | "approval_expired" | ..., "reason": str, "message": str, ...}``),
    the outcome the agent sees.

    An agent that replans (a client app) takes it as the call's outcome: the run goes on and
    is woken to run what the agent appends next. For the others (a fixed plan, a recorded
    transcript) nothing after the step can run: its pending steps are skipped and the run
    fails with the error, the step's index and tool added."""
    step.reject(error=error, now=timezone.now())
    save_step(step, status_was=StepStatus.WAITING)
    record_transition(actor, step, StepStatus.WAITING, error=error)
    if agent_for(run.agent).replans_after_refusal:
        from_gate = run.gate
        run.unblock()
        save_run(run)
        record_transition(actor, run, RunStatus.WAITING, from_gate=from_gate, refused=step.index)
        advance_run_on_commit(run.pk)
        return
    skip_pending_locked(run, actor)
    fail_run_locked(run, actor, {**error, "step": step.index, "tool": step.tool})


def gate_cancel_locked(*, run: Run, step: Step, actor: Actor) -> None:
    """Close the gate of a waiting step whose run is being cancelled (the caller then cancels
    the step)."""
    gates.kind(step.gate).cancel(run=run, step=step, actor=actor)
