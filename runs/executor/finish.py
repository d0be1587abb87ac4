"""Ending a run: failing it, and skipping the steps it will never reach."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from runs.models import Run
from runs.statuses import StepStatus
from runs.transitions import lock_steps, transition


def fail_run_locked(run: Run, actor: Actor, error: dict[str, Any]) -> None:
    """Fail a locked run (running or waiting) with the structured ``error``."""
    run.finished_at = timezone.now()
    transition(run, "fail", actor=actor, error=error, payload={"error": error})


def skip_pending_locked(run: Run, actor: Actor) -> None:
    """Skip every pending step of a locked run: the run ended before reaching them."""
    for step in lock_steps(run, [StepStatus.PENDING]):
        transition(step, "skip", actor=actor)
