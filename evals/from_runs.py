"""Cases made from runs: one from a chosen step of a run, or one per run of a filter.

A case freezes, from the run's records:

- the conversation before the chosen step's call (``runs.selectors.conversation_before_call``
  without the assistant message that made it): what the agent knew when it chose;
- the tool results on record: the run's tool-call ledger (``ToolCall``, succeeded calls with
  their step's arguments), and for a step with no ledger row (a recorded transcript's
  replayed results) its result;
- the tools that write: those of the run's steps whose risk is high or critical, or whose
  registered tool has side effects;
- what was expected, by ``expect``: ``recorded`` (the calls the run made from the chosen step
  to the end of that agent turn: the steps whose tool-call ids the assistant messages after
  the cut hold, up to the next user message; all the run's later steps when the run keeps no
  conversation), ``rejected`` (the chosen step was rejected: the agent must not make that call
  again; the reason is the reviewer's comment) or ``operator`` (the calls an operator wrote,
  ``evals.expectations``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from agentops.actors import Actor
from agentops.errors import InvalidInput
from approvals.models import ApprovalDecision, Decision
from evals.models import Case, CaseSet, CaseSource
from evals.services import NewCase, case_checked, cases_add
from runs.models import Run, Step, ToolCall
from runs.models.choices import Risk
from runs.selectors import conversation_before_call, run_conversation
from runs.statuses import CallStatus, RunStatus, StepStatus
from runs.tools.registry import get_tool

RECORDED, REJECTED, OPERATOR = "recorded", "rejected", "operator"
EXPECTS = (RECORDED, REJECTED, OPERATOR)
# The most runs one bulk request turns into cases.
MAX_BULK = 500


def _tool_results(run: Run, steps: list[Step]) -> list[dict[str, Any]]:
    ledger = ToolCall.objects.filter(run=run, status=CallStatus.SUCCEEDED).order_by("step__index")
    by_step = {call.step_id: call for call in ledger}
    found = []
    for step in steps:
        call = by_step.get(step.pk)
        if call is not None:
            found.append({"tool": step.tool, "args": step.args, "result": call.result})
        elif step.status == StepStatus.SUCCEEDED:
            found.append({"tool": step.tool, "args": step.args, "result": step.result})
    return found


def _writes(steps: list[Step]) -> list[str]:
    names = set()
    for step in steps:
        tool = get_tool(step.tool)
        if step.risk in (Risk.HIGH, Risk.CRITICAL) or (tool is not None and tool.side_effects):
            names.add(step.tool)
    return sorted(names)


def _cut(run: Run, step: Step, conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    before = conversation_before_call(run, step, conversation)
    if before and before[-1].get("role") == "assistant" and before[-1].get("tool_calls"):
        return before[:-1]
    return before


def _turn(steps: list[Step], after: list[dict[str, Any]]) -> list[Step]:
    """The steps of ``steps`` (the chosen one and those after it) made in the agent turn that
    ``after`` (the messages after the cut) holds."""
    ids: set[str] = set()
    for message in after:
        if message.get("role") == "user":
            break
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                ids.add(str(call.get("id", "")))
    if not ids:
        return steps
    return [step for step in steps if step.tool_call_id in ids] or steps[:1]


def _reason(step: Step) -> str:
    decision = (
        ApprovalDecision.objects.filter(
            approval__step=step, decision__in=[Decision.REJECT, Decision.RESPOND]
        )
        .order_by("-created_at")
        .first()
    )
    return decision.comment if decision is not None else ""


def new_case_from_run(
    *,
    run: Run,
    step_index: int,
    expect: str,
    calls: Any = None,
    final_contains: str = "",
    name: str = "",
) -> NewCase:
    """The case of ``run`` at its step ``step_index`` (see the module docstring); ``calls``
    are the operator's expected calls when ``expect`` is ``operator``; ``final_contains``
    what the agent's final answer must contain (``evals.expectations``; empty: anything).

    Raises:
        InvalidInput: ``expect`` is not one of ``EXPECTS``; no such step; ``rejected`` for a
            step that was not rejected; bad operator calls.
    """
    if expect not in EXPECTS:
        raise InvalidInput(f"expect is one of {', '.join(EXPECTS)}", field="expect")
    steps = list(Step.objects.filter(run=run).order_by("index"))
    chosen = next((s for s in steps if s.index == step_index), None)
    if chosen is None:
        raise InvalidInput(f"run {run.pk} has no step {step_index}", field="step_index")
    conversation = run_conversation(run_id=run.pk)
    before = _cut(run, chosen, conversation)
    writes = set(_writes(steps))
    if expect == REJECTED:
        if chosen.status != StepStatus.REJECTED:
            raise InvalidInput(f"step {step_index} was not rejected", field="expect")
        expected: dict[str, Any] = {
            "kind": "must_not",
            "tool": chosen.tool,
            "args": chosen.args,
            "reason": _reason(chosen),
        }
        writes.add(chosen.tool)
    elif expect == OPERATOR:
        expected = {"kind": "calls", "calls": calls, "source": "operator"}
    else:
        later = [s for s in steps if s.index >= step_index]
        turn = _turn(later, conversation[len(before) :])
        expected = {
            "kind": "calls",
            "calls": [{"tool": s.tool, "args": s.args} for s in turn],
            "source": "recorded",
        }
    if final_contains:
        expected["final_contains"] = final_contains
    return case_checked(
        {
            "name": name or f"{run.goal[:250]} (step {step_index})",
            "source": CaseSource.RUN,
            "conversation": before,
            "tool_results": _tool_results(run, steps),
            "write_tools": sorted(writes),
            "expected": expected,
            "metadata": {
                **(run.metadata if isinstance(run.metadata, dict) else {}),
                "goal": run.goal,
                "run_status": run.status,
            },
            "source_run_id": run.pk,
            "source_step_index": step_index,
        },
        "case",
    )


def case_make_from_run(
    *,
    case_set_id: int,
    run_id: uuid.UUID | str,
    step_index: int,
    expect: str,
    calls: Any = None,
    final_contains: str = "",
    name: str = "",
    actor: Actor,
) -> Case:
    """Make a case of run ``run_id`` at step ``step_index`` and add it to case set
    ``case_set_id`` (its next version); see ``new_case_from_run``.

    Raises:
        Run.DoesNotExist: no such run.
        CaseSet.DoesNotExist: no such case set.
        InvalidInput: as ``new_case_from_run``; the run is of another project than the set.
    """
    run = Run.objects.get(pk=run_id)
    case_set = CaseSet.objects.get(pk=case_set_id)
    if run.project_id != case_set.project_id:
        raise InvalidInput("the run and the case set are of different projects", field="run")
    case = new_case_from_run(
        run=run,
        step_index=step_index,
        expect=expect,
        calls=calls,
        final_contains=final_contains,
        name=name,
    )
    return cases_add(case_set_id=case_set_id, cases=[case], actor=actor)[0]


def cases_make_from_runs(
    *,
    case_set_id: int,
    statuses: list[str],
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    actor: Actor,
) -> list[Case]:
    """Make a case of every run of the case set's project in one of ``statuses``, created
    in ``[created_after, created_before)`` (each bound optional), oldest first, at most
    ``MAX_BULK``: a run with a rejected step at its first rejected step (``rejected``), any
    other at its last step (``recorded``); runs without steps are left out. All are added as
    one new version.

    Raises:
        CaseSet.DoesNotExist: no such case set.
        InvalidInput: no status, or one that is no run status.
    """
    if not statuses or any(s not in RunStatus.values for s in statuses):
        raise InvalidInput(f"statuses are among {', '.join(RunStatus.values)}", field="statuses")
    case_set = CaseSet.objects.get(pk=case_set_id)
    runs = Run.objects.filter(project_id=case_set.project_id, status__in=statuses)
    if created_after is not None:
        runs = runs.filter(created_at__gte=created_after)
    if created_before is not None:
        runs = runs.filter(created_at__lt=created_before)
    made = []
    for run in runs.order_by("created_at")[:MAX_BULK]:
        steps = Step.objects.filter(run=run).order_by("index")
        rejected = steps.filter(status=StepStatus.REJECTED).first()
        last = steps.last()
        if rejected is not None:
            made.append(new_case_from_run(run=run, step_index=rejected.index, expect=REJECTED))
        elif last is not None:
            made.append(new_case_from_run(run=run, step_index=last.index, expect=RECORDED))
    return cases_add(case_set_id=case_set_id, cases=made, actor=actor)
