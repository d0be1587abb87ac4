"""Ending a run: failing it, with the steps it will never reach skipped; a compensating run
ends ``compensation_failed`` instead, with what is left undone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from runs.models import Run, Step
from runs.statuses import StepStatus
from runs.transitions import lock_steps, transition

# What a run's failure starts in the same transaction, called with the locked failed run
# (installed at start-up: the automatic compensation of ``runs.control.compensation``).
_AFTER_FAILURE: list[Callable[[Run, Actor], None]] = []


def on_run_failed(hook: Callable[[Run, Actor], None]) -> None:
    """Call ``hook(run, actor)`` in the transaction that fails a run, after the run failed
    (called once, at start-up)."""
    if hook not in _AFTER_FAILURE:
        _AFTER_FAILURE.append(hook)


def compensation_failure(run: Run, error: dict[str, Any]) -> dict[str, Any]:
    """The ``compensation_failed`` error of a compensating ``run`` stopped by ``error`` (a
    compensating step failed or was refused, or an operator cancelled it): the cause's
    ``error`` with ``type`` ``compensation_failed``, ``cause`` its own type, and
    ``left_undone``: each step whose compensation did not succeed, as ``{"step": index,
    "tool": name, "compensation": index of its compensating step}``, in the order they were
    to be undone."""
    left = (
        Step.objects.filter(run_id=run.pk, compensates__isnull=False)
        .exclude(status=StepStatus.SUCCEEDED)
        .values_list("index", "compensates__index", "compensates__tool")
        .order_by("index")
    )
    return {
        **error,
        "type": "compensation_failed",
        "cause": error.get("type", ""),
        "message": f"compensation stopped: {error.get('message', '')}",
        "left_undone": [
            {"step": undone, "tool": tool, "compensation": index} for index, undone, tool in left
        ],
    }


def fail_run_locked(
    run: Run, actor: Actor, error: dict[str, Any], *, skip_pending: bool = False
) -> None:
    """Fail a locked run (running or waiting) with the structured ``error``; with
    ``skip_pending``, skip each of its pending steps first (the run ended before reaching
    them). A compensating run ends ``compensation_failed`` (``compensation_failure``), its
    pending compensating steps skipped; any other runs the failure hooks
    (``on_run_failed``) once failed."""
    if skip_pending or run.compensating:
        for step in lock_steps(run, [StepStatus.PENDING]):
            transition(step, "skip", actor=actor)
    run.finished_at = timezone.now()
    if run.compensating:
        error = compensation_failure(run, error)
        transition(run, "fail_compensation", actor=actor, error=error, payload={"error": error})
        return
    transition(run, "fail", actor=actor, error=error, payload={"error": error})
    for hook in _AFTER_FAILURE:
        hook(run, actor)
