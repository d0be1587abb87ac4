"""Enforcing a run's budget (``runs.budget``): before a step starts, and when a report of
usage adds to the run's totals."""

from __future__ import annotations

from django.utils import timezone

from agentops.actors import Actor
from runs.budget import budget_crossing
from runs.executor.finish import fail_run_locked
from runs.executor.gates import cancel_open_steps
from runs.gates import Classification, StepRequest, step_policy
from runs.models import OnBudgetExceeded, Run, Step
from runs.statuses import RunStatus
from runs.store.writes import step_change


def budget_stops_run_locked(run: Run, actor: Actor) -> bool:
    """After usage was added to a locked run's totals: when they cross its budget and its
    policy is to fail, fail it now (its open steps cancelled, their gates closed). Returns
    whether it failed. Under the approve policy the next step waits instead
    (``budget_gates_step_locked``)."""
    if run.status not in (RunStatus.RUNNING, RunStatus.WAITING):
        return False
    if run.on_budget_exceeded != OnBudgetExceeded.FAIL:
        return False
    crossing = budget_crossing(run)
    if crossing is None:
        return False
    cancel_open_steps(run, actor, timezone.now())
    fail_run_locked(run, actor, crossing.as_json())
    return True


def budget_gates_step_locked(run: Run, step: Step, actor: Actor) -> bool:
    """Before the pending ``step`` of a locked running run starts: when the run crossed its
    budget, either fail the run (policy fail, or no gate kind can ask a person; returns True:
    the step must not start), or put the step at the gate the step policy escalates it to,
    with the crossing as the reason (policy approve; returns False: the caller opens the
    gate). Returns False when the budget is not crossed."""
    crossing = budget_crossing(run, next_index=step.index)
    if crossing is None:
        return False
    found = crossing.as_json()
    if run.on_budget_exceeded == OnBudgetExceeded.APPROVE:
        escalated = step_policy().escalate(
            StepRequest(step.tool, step.args),
            Classification(step.risk, step.gate, step.gate_params),
            f"approval to continue: {found['message']}",
        )
        if escalated is not None:
            step.gate, step.gate_params, step.budget_crossing = (
                escalated.gate,
                escalated.params,
                found,
            )
            step_change(
                step.pk,
                {"gate": step.gate, "gate_params": step.gate_params, "budget_crossing": found},
            )
            return False
    fail_run_locked(run, actor, found, skip_pending=True)
    return True


def step_limit_locked(run: Run, count: int) -> str:
    """Whether a locked client run that has ``count`` steps may get one more: "" when it may,
    else why not. One step past the step limit may be appended: when its turn comes, the run
    fails (budget policy fail) or the step waits for approval to continue (policy approve);
    a second one is refused until then."""
    allowed = run.step_limit * (run.budget_grants + 1)
    if count <= allowed:
        return ""
    return f"run reached its step limit of {allowed}: a step past it is already waiting"
