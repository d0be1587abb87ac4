"""Ending a run: failing it, with the steps it will never reach skipped."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from runs.models import Run
from runs.statuses import StepStatus
from runs.transitions import lock_steps, transition


def fail_run_locked(
    run: Run, actor: Actor, error: dict[str, Any], *, skip_pending: bool = False
) -> None:
    """Fail a locked run (running or waiting) with the structured ``error``; with
    ``skip_pending``, skip each of its pending steps first (the run ended before reaching
    them)."""
    if skip_pending:
        for step in lock_steps(run, [StepStatus.PENDING]):
            transition(step, "skip", actor=actor)
    run.finished_at = timezone.now()
    transition(run, "fail", actor=actor, error=error, payload={"error": error})
