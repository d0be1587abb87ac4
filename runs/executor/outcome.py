"""What an attempt's outcome does to a locked step and its run: success (the step, its
checkpoint and the run written), a retry with backoff, or failure. The server's executor, a
client's report and an operator's settlement all record a success here."""

from __future__ import annotations

import random
from typing import Any

from django.conf import settings

from agentops.actors import Actor
from agentops.clock import DatabaseTime
from runs.agents import agent_for
from runs.executor.finish import fail_run_locked
from runs.models import Checkpoint, Run, Step
from runs.store.writes import insert_new
from runs.transitions import save_run, save_step, transition
from runs.wakeups import retry_step_on_commit


def backoff_seconds(attempt: int) -> float:
    """Delay before the retry that follows attempt number ``attempt`` (1-based), in seconds.

    Exponential backoff with "equal jitter" (AWS Architecture Blog, "Exponential Backoff And
    Jitter", 2015): ``d = min(cap, base * 2**(attempt-1))``, then a uniform pick in
    ``[d/2, d]``, so retries of many steps do not arrive together. ``base`` and ``cap`` are
    ``AGENTOPS_RETRY_BASE_SECONDS`` and ``AGENTOPS_RETRY_MAX_SECONDS``.
    """
    ceiling = min(
        settings.AGENTOPS_RETRY_MAX_SECONDS,
        settings.AGENTOPS_RETRY_BASE_SECONDS * 2 ** max(0, attempt - 1),
    )
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def tool_error_mark(tool_error: bool) -> dict[str, Any]:
    """What a step's ``succeeded`` audit event adds for a tool error: ``{"tool_error":
    true}``, else nothing (the payload of a plain success is unchanged)."""
    return {"tool_error": True} if tool_error else {}


def succeed_locked(
    run: Run,
    step: Step,
    result: Any,
    actor: Actor,
    *,
    now: Any,
    tool_error: bool = False,
    settled: dict[str, Any] | None = None,
    accepted: bool = False,
    row_status: str = "",
    **payload: Any,
) -> None:
    """A locked step succeeds with the verbatim ``result`` (any JSON): the step written, its
    checkpoint (the run's state after it, from its agent) inserted, the run written; the
    caller advances the run. A running step succeeds (``tool_error``: the tool answered with
    an error, the step still completed); with ``settled`` (who, whether it happened, why) a
    failed step whose outcome was unknown does (an operator settled it); with ``accepted`` a
    waiting step holding a result that failed validation does (a reviewer accepted it,
    ``runs.executor.gates.gate_satisfied_locked``). ``row_status`` is the
    status its row holds when that is not its status now (a client's report moves it ready →
    running → succeeded with one write). ``payload`` goes to the ``step.succeeded`` audit
    event, with ``attempt``.

    Raises:
        ConcurrentTransition: the step's or run's row changed since it was read.
    """
    if accepted:
        name, fields, payload = "accept_result", {}, {"accepted": step.error}
    elif settled is None:
        name, fields = "succeed", {"tool_error": tool_error}
        payload = {"attempt": step.attempts, **payload, **tool_error_mark(tool_error)}
    else:
        name, fields, payload = "settle_happened", {}, {"settled": settled}
    if not accepted:
        fields["result"] = result
    from_state = transition(step, name, actor=actor, save=False, now=now, payload=payload, **fields)
    save_step(step, status_was=row_status or from_state)
    run.state = agent_for(run.agent).checkpoint_state(
        run, index=step.index, tool=step.tool, result=result
    )
    insert_new([Checkpoint(run_id=run.pk, step_id=step.pk, index=step.index, state=run.state)])
    save_run(run)


def fail_or_retry(run: Run, step: Step, error: dict[str, Any], actor: Actor, now: Any) -> None:
    """After a failed attempt of a locked running step: wait to retry (after
    ``backoff_seconds``) when the error is retryable and attempts remain, else fail the step
    and the run."""
    if error.get("retryable") and step.attempts < step.max_attempts:
        delay = backoff_seconds(step.attempts)
        # Due by the database's clock, which the sweeper and the retry's wake-up compare with.
        transition(
            step,
            "schedule_retry",
            actor=actor,
            error=error,
            next_attempt_at=DatabaseTime(delay),
            now=now,
            payload={"error": error, "retry_in_s": delay},
        )
        save_run(run)
        retry_step_on_commit(step.pk, delay)
        return
    transition(step, "fail", actor=actor, error=error, now=now, payload={"error": error})
    fail_run_locked(run, actor, {**error, "step": step.index, "tool": step.tool})
