"""Client-run tools: a step whose tool the client app runs itself (``Step.executor`` client).

When such a step's turn comes and its gate (if any) let it through, it becomes ``ready``
instead of going to the workers: its client reads the final arguments (a reviewer may have
edited them) and the idempotency key, runs the tool, and reports the outcome
(``step_report``):

- ``{"result": <any JSON>}``: the step succeeds with it and the run moves on; with
  ``"is_error": true`` beside it (an MCP result with ``isError``, a tool's error answer) the
  step still succeeds (the call happened, its answer is for the agent) but is marked a tool
  error (``Step.tool_error``);
- ``{"error": {"type": str, "message": str, "retryable": bool}}``: with ``retryable`` and
  attempts left the step is ``ready`` again; otherwise it fails, and the run with it;
- ``{"outcome": "unknown"}``: the client cannot tell whether the call took effect (it
  crashed mid-call): the step fails with ``outcome_unknown`` and nobody repeats it unasked (an
  operator may resume the run; the client then runs it again under the same key).

The report settles the tool-call ledger row of the step's idempotency key and is kept there:
the same report again answers the step as it is; a different one for a settled step is a
conflict. A client that crashed reads the step: ``succeeded`` means its effect is on record.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from artifacts.services import offload_large_result
from runs.executor.advance import advance_locked
from runs.executor.ledger import ledger_report
from runs.executor.outcome import fail_or_retry, succeed_locked
from runs.models import Executor, Step, StepAttempt, ToolCall
from runs.statuses import AttemptStatus, RunStatus, StepStatus
from runs.store.step import lock_for_report
from runs.store.transaction import pipelined_atomic
from runs.store.writes import insert_new
from runs.transitions import save_run, save_step, transition

REPORT_KEYS = {"result", "error", "outcome"}
# Optional beside ``result``: whether the tool answered with an error.
RESULT_FLAGS = {"is_error"}
# Audit events of a report's transaction: the step running, then succeeded (reserved ids).
_REPORT_EVENTS = 2
ERROR_KEYS = {"type", "message", "retryable"}
MAX_REPORT_BYTES = 1_000_000


@dataclass(frozen=True)
class Report:
    """A client's report on a tool it ran: ``kind`` is ``result``, ``error`` or ``unknown``;
    ``value`` the result or the error object; ``raw`` the report as sent (kept in the
    ledger); ``tool_error`` whether a result is the tool's error answer (``is_error``)."""

    kind: str
    value: Any
    raw: dict[str, Any]
    tool_error: bool = False


def parse_report(raw: Any) -> Report:
    """Check a report: exactly one of ``{"result": any}`` (optionally with ``"is_error":
    bool``), ``{"error": {"type": str, "message": str, "retryable": bool}}``,
    ``{"outcome": "unknown"}``.

    Raises:
        InvalidInput: anything else (an error without its keys, a result over 1 MB of JSON,
            an ``is_error`` that is not a boolean or not beside a result).
    """
    if (
        not isinstance(raw, dict)
        or len(set(raw) & REPORT_KEYS) != 1
        or set(raw) - REPORT_KEYS - RESULT_FLAGS
    ):
        raise InvalidInput(
            'a report is exactly one of {"result": ...}, {"error": {...}} or '
            '{"outcome": "unknown"}',
            field="result",
        )
    if "is_error" in raw:
        if "result" not in raw:
            raise InvalidInput("is_error goes only with a result", field="is_error")
        if not isinstance(raw["is_error"], bool):
            raise InvalidInput("is_error must be true or false", field="is_error")
    if "result" in raw:
        if len(json.dumps(raw["result"])) > MAX_REPORT_BYTES:
            raise InvalidInput(f"result exceeds {MAX_REPORT_BYTES} bytes of JSON", field="result")
        return Report("result", raw["result"], raw, tool_error=raw.get("is_error", False))
    if "outcome" in raw:
        if raw["outcome"] != "unknown":
            raise InvalidInput('outcome must be "unknown"', field="outcome")
        return Report("unknown", None, raw)
    error = raw["error"]
    if not isinstance(error, dict) or set(error) != ERROR_KEYS:
        raise InvalidInput(
            "error must be an object with exactly type, message and retryable", field="error"
        )
    if not isinstance(error["type"], str) or not 1 <= len(error["type"]) <= 100:
        raise InvalidInput("error.type must be a string of 1-100 characters", field="error")
    if not isinstance(error["message"], str) or len(error["message"]) > 10_000:
        raise InvalidInput("error.message must be a string (at most 10000)", field="error")
    if not isinstance(error["retryable"], bool):
        raise InvalidInput("error.retryable must be true or false", field="error")
    return Report("error", dict(error), raw)


def _repeat_of_settled(step: Step, report: Report) -> bool:
    """Whether ``report`` is the report that settled ``step`` (a retry of the same request).

    Raises:
        Conflict: the step is settled with a different report, or is not ready.
    """
    if step.status == StepStatus.READY:
        return False
    if step.status in (StepStatus.SUCCEEDED, StepStatus.FAILED):
        settled = (
            ToolCall.objects.filter(idempotency_key=step.idempotency_key)
            .values_list("report", flat=True)
            .first()
        )
        if settled == report.raw:
            return True
        if settled is not None:
            raise Conflict(f"step {step.pk} is already {step.status} with a different report")
    raise Conflict(f"step {step.pk} is {step.status_info.value}: it is not ready for a result")


def step_report(
    *,
    actor: Actor,
    run_id: uuid.UUID,
    step_id: int,
    report: Any,
    invalid: dict[str, Any] | None = None,
) -> Step:
    """Record what a client reported on a client step it ran (see the module docstring).
    ``invalid`` (beside a result only: ``{"type": "validation_failed", "rule", "path",
    "message"}``, ``runs.tools.ValidationFailure.as_error``) says that the result failed a
    validator the reporter checked (the MCP gateway: an upstream tool's ``outputSchema``):
    the ledger keeps the result as ``invalid`` and the step fails with that error, not
    retried (a retry would call the tool again).

    Returns the step as it is now.

    Raises:
        Step.DoesNotExist: no such step in run ``run_id``.
        InvalidInput: a malformed report, or ``invalid`` beside no result; not a client step.
        Conflict: the step is not ready (still pending or awaiting approval, rejected,
            cancelled) or was settled by a different report; the run is not running.
    """
    checked = parse_report(report)
    if invalid is not None and checked.kind != "result":
        raise InvalidInput("only a result can fail validation", field="result")
    if checked.kind == "result":
        # A result over the threshold is kept as an artifact; the step and the ledger hold
        # a reference (the same for the same result, so a repeated report still matches).
        value = offload_large_result(
            run_id=run_id, step_id=step_id, result=checked.value, actor=actor
        )
        checked = replace(checked, value=value, raw={**checked.raw, "result": value})
    with pipelined_atomic():
        run, step, upcoming = lock_for_report(run_id, step_id, _REPORT_EVENTS)
        if step.executor != Executor.CLIENT:
            raise InvalidInput("this step's tool is run by agentops, not by its client")
        if _repeat_of_settled(step, checked):
            return step
        if run.status != RunStatus.RUNNING:
            raise Conflict(f"run is {run.status_info.value}: no result can be recorded")
        now = timezone.now()
        transition(
            step,
            "report_start",
            actor=actor,
            save=False,
            owner=actor.id,
            now=now,
            payload={"attempt": step.attempts + 1},  # the attempt the report counts
        )
        handed_over = step.started_at or now
        duration_ms = int((now - handed_over).total_seconds() * 1000)
        failure = _failure(step, checked, invalid)
        insert_new(
            [
                StepAttempt(
                    step=step,
                    number=step.attempts,
                    status=AttemptStatus.FAILED if failure else AttemptStatus.SUCCEEDED,
                    worker=actor.id,
                    started_at=handed_over,
                    finished_at=now,
                    duration_ms=duration_ms,
                    error=checked.value if checked.kind == "error" else invalid,
                )
            ]
        )
        ledger_report(
            run, step, checked.kind, checked.value, checked.raw, now, invalid=invalid is not None
        )
        run.duration_ms += duration_ms
        if failure is None:
            # ready → running → succeeded: both transitions audited, the row written once.
            succeed_locked(
                run,
                step,
                checked.value,
                actor,
                now=now,
                tool_error=checked.tool_error,
                row_status=StepStatus.READY,
            )
            advance_locked(run, actor, first_open=upcoming)
            return step
        save_step(step, status_was=StepStatus.READY)
        if failure["retryable"] and step.attempts < step.max_attempts:
            transition(
                step, "hand_back", actor=actor, error=failure, now=now, payload={"error": failure}
            )
            save_run(run)
        else:
            error = {**failure, "retryable": False, "attempt": step.attempts}
            fail_or_retry(run, step, error, actor, now)
    return step


def _failure(step: Step, report: Report, invalid: dict[str, Any] | None) -> dict[str, Any] | None:
    """The error of a report that does not succeed ``step`` (None: it does): the client's
    error, its result's validation failure (``invalid``, never retryable), or an unknown
    outcome's."""
    if report.kind == "error":
        return dict(report.value)
    if invalid is not None:
        return {**invalid, "retryable": False}
    if report.kind == "unknown":
        return _unknown_error(step)
    return None


def _unknown_error(step: Step) -> dict[str, Any]:
    return {
        "type": "outcome_unknown",
        "message": f"the client cannot tell whether {step.tool} took effect: not repeated "
        "unless an operator resumes the run",
        "retryable": False,
    }
