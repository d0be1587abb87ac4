"""The tool-call ledger: one row per idempotency key with the outcome of its side effect.
This module alone writes it.

A claim opens the row of its step's key as ``started`` before the tool is called; recording
the outcome settles it. A key already ``succeeded`` returns its recorded result instead of
calling the tool again; a non-idempotent call whose row is still ``started`` (its outcome is
unknown) is never repeated. A result that failed its tool's validators is kept as ``invalid``:
the tool is called again only when asked (a validator that declares a retry, an operator's
resume), and a reviewer who accepts it makes it ``succeeded`` (``ledger_accepted``).
A client step's row is opened and settled by its client's reports
(``ledger_report``); an operator settles a call whose outcome was unknown
(``ledger_settled_by_operator``).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from runs.executor.call import Outcome
from runs.models import AgentKind, Run, Step, ToolCall
from runs.statuses import CallStatus
from runs.store.writes import ledger_change, ledger_insert, ledger_upsert
from runs.tools import get_tool

# How a claimed step gets its outcome: call its tool, replay its recorded output (transcript
# runs), take the ledger's recorded result, or refuse a repeat whose outcome is unknown.
CALL, REPLAY, LEDGER, UNKNOWN = "call", "replay", "ledger", "unknown"


def ledger_open(run: Run, step: Step, now: Any) -> tuple[str, Any]:
    """Open (or re-open) the ledger row of a claimed step's idempotency key for its current
    attempt; returns (``CALL`` | ``REPLAY`` | ``LEDGER`` | ``UNKNOWN``, the recorded result
    for ``LEDGER``). The caller holds the step's row lock."""
    fields = {
        "run_id": run.pk,
        "step_id": step.pk,
        "tool": step.tool,
        "status": CallStatus.STARTED,
        "attempt": step.attempts,
        "started_at": now,
    }
    replay = run.agent == AgentKind.TRANSCRIPT
    if step.attempts == 1:
        # The key names this step and its arguments: no earlier attempt can have opened it.
        ledger_insert(ToolCall(idempotency_key=step.idempotency_key, **fields))
        return (REPLAY if replay else CALL), None
    call, created = ToolCall.objects.select_for_update().get_or_create(
        idempotency_key=step.idempotency_key, defaults=fields
    )
    if not created:
        if call.status == CallStatus.SUCCEEDED:
            return LEDGER, call.result
        tool = get_tool(step.tool)
        if call.status == CallStatus.STARTED and not replay and tool and not tool.safe_to_repeat:
            return UNKNOWN, None
        call.status, call.attempt, call.started_at, call.finished_at = (
            CallStatus.STARTED,
            step.attempts,
            now,
            None,
        )
        call.save()
    return (REPLAY if replay else CALL), None


def ledger_settle(
    step: Step, plan: str, outcome: Outcome, now: Any, *, invalid: bool = False
) -> None:
    """Record the outcome of the call ``step`` (as claimed) made under ``plan``; an unknown
    outcome leaves the row ``started``; a result that failed validation (``invalid``) is kept
    as ``invalid``.

    Only while the row still belongs to this attempt: a late attempt (its lease expired and a
    later attempt re-opened the row) must not overwrite what the later attempt records.
    """
    if plan not in (CALL, REPLAY) or outcome.effect_unknown:
        return
    ledger_change(
        step.idempotency_key,
        step.attempts,
        {
            "status": (
                (CallStatus.INVALID if invalid else CallStatus.SUCCEEDED)
                if outcome.ok
                else CallStatus.FAILED
            ),
            "result": outcome.result if outcome.ok else None,
            "duration_ms": outcome.duration_ms,
            "finished_at": now,
        },
    )


def ledger_outcome_unknown(step: Step) -> bool:
    """Whether the ledger row of ``step``'s key is still ``started`` for a tool that is not
    safe to repeat: its last call may have taken effect, so it must not be called again."""
    tool = get_tool(step.tool)
    if tool is None or tool.safe_to_repeat:
        return False
    return ToolCall.objects.filter(
        idempotency_key=step.idempotency_key, status=CallStatus.STARTED
    ).exists()


def ledger_report(
    run: Run, step: Step, kind: str, value: Any, raw: Any, now: Any, *, invalid: bool = False
) -> None:
    """The ledger row of a client step's key: opened by its client's first report, settled by
    each (``kind`` ``result`` with ``value`` its result, ``invalid`` when it failed
    validation; ``error``; or ``unknown``, which leaves it ``started``); ``raw`` is the report
    as sent, kept in the row."""
    status = {
        "result": CallStatus.INVALID if invalid else CallStatus.SUCCEEDED,
        "error": CallStatus.FAILED,
        "unknown": CallStatus.STARTED,
    }[kind]
    fields = {
        "status": status,
        "attempt": step.attempts,
        "result": value if kind == "result" else None,
        "report": raw,
        "finished_at": None if kind == "unknown" else now,
    }
    call = ToolCall(
        idempotency_key=step.idempotency_key,
        run=run,
        step=step,
        tool=step.tool,
        started_at=step.started_at or now,
        **fields,
    )
    ledger_upsert(call, list(fields))


def ledger_settled_by_operator(step: Step, *, happened: bool, result: Any, settled: Any) -> None:
    """An operator settled the unknown outcome of ``step``'s call: its ledger row is
    ``succeeded`` with ``result`` when it ``happened``, else ``failed`` (a new attempt may
    call the tool under the same key); ``settled`` (who, whether, why) is kept as its report."""
    ToolCall.objects.filter(idempotency_key=step.idempotency_key).update(
        status=CallStatus.SUCCEEDED if happened else CallStatus.FAILED,
        result=result,
        report={"settled": settled},
        finished_at=timezone.now(),
    )


def ledger_accepted(step: Step) -> None:
    """A reviewer accepted the result of ``step``'s call that failed validation: its ledger
    row is ``succeeded`` (a later attempt returns that result)."""
    ToolCall.objects.filter(idempotency_key=step.idempotency_key, status=CallStatus.INVALID).update(
        status=CallStatus.SUCCEEDED
    )
