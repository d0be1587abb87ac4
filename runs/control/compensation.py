"""Compensating a run (a saga): undoing the effects of its succeeded steps after it failed or
was cancelled.

``run_compensate`` appends one compensating step per compensable step (a succeeded step, not
a tool error, whose tool declares a compensation: ``runs.tools.compensation_of``), in reverse
order of the steps they undo, and moves the run back to running, ``compensating``. From then
on they are ordinary steps: the step policy classifies them (a risky one waits at its gate
for a reviewer), the workers run them one at a time under their own idempotency keys and
ledger rows (a redelivered or recovered compensation returns its recorded result instead of
acting twice), and the executor ends the run ``compensated`` once the last succeeded, or
``compensation_failed`` when one fails or is refused (``compensation_failure``). A run
compensates once: asking again is refused, so compensating twice acts once.
"""

from __future__ import annotations

import uuid

from django.db.models import Max

from agentops.actors import Actor
from agentops.errors import Conflict
from audit.services import audited_atomic
from runs.agents import StepSpec
from runs.control.create import classify_specs, insert_steps, new_step
from runs.executor.advance import advance_locked
from runs.models import OnFailure, Run, Step
from runs.policy import run_policy
from runs.statuses import RunStatus, StepStatus
from runs.tools import (
    Compensation,
    CompensationError,
    compensation_args,
    compensation_of,
    get_tool,
)
from runs.transitions import lock_run, lock_steps, record_event, transition


def _compensating_spec(step: Step, compensation: Compensation) -> StepSpec:
    """The compensating step of the succeeded ``step`` by its tool's ``compensation``.

    Raises:
        Conflict: its compensation names no registered tool, or its arguments cannot be
            built from the step or fail that tool's schema.
    """
    where = f"step #{step.index} ({step.tool})"
    tool = get_tool(compensation.tool)
    if tool is None:
        raise Conflict(f"{where} is undone by {compensation.tool!r}, which is not registered")
    call = {"idempotency_key": step.idempotency_key, "tool": step.tool, "index": step.index}
    try:
        args = compensation_args(compensation, args=step.args, result=step.result, call=call)
    except CompensationError as exc:
        raise Conflict(f"{where} cannot be undone: {exc}") from None
    problem = tool.validate_args(args)
    if problem:
        raise Conflict(f"{where} cannot be undone: {compensation.tool} args: {problem}")
    return StepSpec(
        tool=compensation.tool, args=args, rationale=f"undoes step #{step.index} ({step.tool})"
    )


def compensable_steps(run: Run) -> list[tuple[Step, Compensation]]:
    """The steps of ``run`` its compensation undoes, the last first, each with its tool's
    compensation: succeeded (not a tool error: such a call did not do what was asked), not
    compensations themselves, with a declared compensation."""
    succeeded = run.steps.filter(
        status=StepStatus.SUCCEEDED, tool_error=False, compensates__isnull=True
    ).order_by("-index")
    found = [(step, compensation_of(step.tool)) for step in succeeded]
    return [(step, compensation) for step, compensation in found if compensation is not None]


def compensate_locked(run: Run, actor: Actor) -> None:
    """Compensate the locked failed or cancelled ``run`` (see ``run_compensate``).

    Raises:
        Conflict: as ``run_compensate``; raised before anything is written.
    """
    if run.compensating or run.status not in (RunStatus.FAILED, RunStatus.CANCELLED):
        shown = run.status_info.value
        raise Conflict(
            f"only a failed or cancelled run can be compensated, once; this run is {shown}"
        )
    compensable = compensable_steps(run)
    if not compensable:
        raise Conflict("nothing to compensate: no succeeded step declares a compensation")
    specs = [_compensating_spec(step, compensation) for step, compensation in compensable]
    originals = [step for step, _compensation in compensable]
    for step in lock_steps(run, [StepStatus.PENDING]):
        transition(step, "skip", actor=actor)
    last = run.steps.aggregate(last=Max("index"))["last"]
    steps = [
        new_step(run, spec, index=last + 1 + i, klass=klass, requested_by=actor.user)
        for i, (spec, klass) in enumerate(
            zip(specs, classify_specs(specs, policy=run_policy(run)), strict=True)
        )
    ]
    for step, original in zip(steps, originals, strict=True):
        step.compensates = original
    insert_steps(steps, actor)
    run.finished_at = None
    transition(
        run,
        "compensate",
        actor=actor,
        payload={"undoes": [original.index for original in originals]},
    )
    advance_locked(run, actor)


def run_compensate(*, run_id: uuid.UUID | str, actor: Actor) -> Run:
    """Compensate a failed or cancelled run: its pending steps are skipped, a compensating
    step is appended for each compensable step (``compensable_steps``), last first, and the
    run runs them (``running``, ``compensating``); it ends ``compensated`` or
    ``compensation_failed``. One transaction, the run locked first.

    Raises:
        Run.DoesNotExist: unknown run.
        Conflict: the run is not failed or cancelled, or is compensated already; none of its
            steps is compensable; a compensation cannot be built (see ``_compensating_spec``).
            Nothing changes.
    """
    with audited_atomic():
        run = lock_run(run_id)
        compensate_locked(run, actor)
    return run


def compensate_after_failure(run: Run, actor: Actor) -> None:
    """The failure hook (``runs.executor.finish.on_run_failed``) of a run whose policy is
    ``on_failure`` = compensate: compensate it in the transaction that failed it. When it
    cannot be (nothing compensable, a compensation that cannot be built) it stays failed,
    with a ``run.compensation_refused`` audit event saying why; an operator may act then."""
    if run.on_failure != OnFailure.COMPENSATE:
        return
    try:
        compensate_locked(run, actor)
    except Conflict as exc:
        record_event(actor, run, "compensation_refused", reason=str(exc))
