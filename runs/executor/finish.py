"""Ending a run: failing it, and skipping the steps it will never reach."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from runs.models import Run
from runs.statuses import StepStatus
from runs.transitions import lock_steps, record_transition, save_run, save_step


def fail_run_locked(run: Run, actor: Actor, error: dict[str, Any]) -> None:
    """Fail a locked run (running or waiting) with the structured ``error``."""
    from_state, from_gate = run.status, run.gate
    run.fail(error=error)
    run.finished_at = timezone.now()
    save_run(run)
    record_transition(actor, run, from_state, from_gate=from_gate, error=error)


def skip_pending_locked(run: Run, actor: Actor) -> None:
    """Skip every pending step of a locked run: the run ended before reaching them."""
    for step in lock_steps(run, [StepStatus.PENDING]):
        step.skip()
        save_step(step, status_was=StepStatus.PENDING)
        record_transition(actor, step, StepStatus.PENDING)
