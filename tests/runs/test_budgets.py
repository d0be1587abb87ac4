"""Run budgets: each limit (tokens, cost, steps, deadline) under both policies: crossing it
fails the run, or the next step waits for a reviewer's approval to continue, which grants one
more allowance."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.control.conversation import run_messages_append
from runs.control.create import run_create, step_append
from runs.models import Run, RunStatus, Step, StepStatus
from tests.api.conftest import RUNS_URL, token_client
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

ECHO = {"tool": "echo", "args": {"value": 1}}
TURN = [{"role": "assistant", "content": "thinking"}]


@pytest.fixture
def drive(operator, reviewer, django_capture_on_commit_callbacks):
    """Helpers that act as the client app (``op``) and a reviewer, running on-commit work."""
    capture = django_capture_on_commit_callbacks
    op, rev = Actor.for_user(operator, via_api=True), Actor.for_user(reviewer)

    class Drive:
        def __init__(self) -> None:
            self.capture, self.op = capture, op

        def create(self, budget: dict[str, Any]) -> Run:
            with capture(execute=True):
                return run_create(actor=op, agent="client", goal="budgeted", budget=budget)

        def append(self, run: Run, **extra: Any) -> Step:
            with capture(execute=True):
                step = step_append(actor=op, run_id=run.pk, **{**ECHO, **extra})
            step.refresh_from_db()
            return step

        def turn(self, run: Run, **usage: Any) -> None:
            with capture(execute=True):
                run_messages_append(
                    actor=op, run_id=run.pk, messages=TURN, usage={"model": "m", **usage}
                )

        def decide(self, step: Step, decision: str) -> None:
            approval = ApprovalRequest.objects.get(step=step)
            with capture(execute=True):
                approval_decide(
                    approval_id=approval.pk, actor=rev, decision=decision, comment="budget"
                )

    return Drive()


def _status(obj: Run | Step) -> str:
    obj.refresh_from_db()
    return obj.status_info.value


@pytest.mark.parametrize(
    ("budget", "usage"),
    [
        ({"max_tokens": 1000}, {"input_tokens": 900, "output_tokens": 101}),
        ({"max_cost_usd": 0.5}, {"cost_usd": 0.500001}),
    ],
    ids=["max_tokens", "max_cost_usd"],
)
def test_crossing_a_usage_limit_fails_the_run_at_once(drive, budget, usage):
    run = drive.create({**budget, "on_exceed": "fail"})
    ready = drive.append(run, executor="client", tool="get_quote")
    assert _status(ready) == "ready"
    drive.turn(run, input_tokens=0)
    assert _status(run) == "running"
    drive.turn(run, **usage)
    run.refresh_from_db()
    limit = next(iter(budget))
    assert run.status == RunStatus.FAILED
    assert (run.error["type"], run.error["limit"]) == ("budget_exceeded", limit)
    assert run.error["allowed"] == budget[limit]
    # The step the client was about to run is cancelled with it.
    assert _status(ready) == "cancelled"


@pytest.mark.parametrize(
    ("budget", "usage", "within_grant"),
    [
        ({"max_tokens": 1000}, {"input_tokens": 1001}, {"input_tokens": 999}),
        ({"max_cost_usd": 0.5}, {"cost_usd": 0.6}, {"cost_usd": 0.4}),
    ],
    ids=["max_tokens", "max_cost_usd"],
)
def test_crossing_a_usage_limit_asks_a_reviewer_to_continue(drive, budget, usage, within_grant):
    run = drive.create({**budget, "on_exceed": "approve"})
    drive.turn(run, **usage)
    assert _status(run) == "running"
    # echo is low risk: only the budget sends it to a reviewer.
    step = drive.append(run)
    assert _status(step) == "awaiting_approval"
    assert step.budget_crossing["limit"] == next(iter(budget))
    approval = ApprovalRequest.objects.get(step=step)
    assert approval.policy["reason"].startswith("approval to continue: the run's")
    drive.decide(step, "approve")
    assert _status(step) == "succeeded"
    run.refresh_from_db()
    assert run.budget_grants == 1
    # The grant is one more allowance: usage within it needs nobody.
    drive.turn(run, **within_grant)
    assert _status(drive.append(run)) == "succeeded"
    # Past the second allowance a reviewer is asked again; a rejection refuses only the step.
    drive.turn(run, **usage)
    again = drive.append(run)
    assert _status(again) == "awaiting_approval"
    drive.decide(again, "reject")
    assert (_status(again), _status(run)) == ("rejected", "running")
    assert Run.objects.get(pk=run.pk).budget_grants == 1


def test_a_step_past_max_steps_fails_the_run(drive):
    run = drive.create({"max_steps": 2})
    drive.append(run, executor="client", tool="get_quote")
    second = drive.append(run)
    third = drive.append(run)
    # The step past the limit waits behind the client's step; a fourth is refused.
    assert _status(third) == "pending"
    with assert_unchanged(), pytest.raises(Conflict, match="step limit of 2"):
        drive.append(run)
    step = Step.objects.get(run=run, index=0)
    from runs.executor.client import step_report

    with drive.capture(execute=True):
        step_report(actor=drive.op, run_id=run.pk, step_id=step.pk, report={"result": 1})
    assert (_status(second), _status(third)) == ("succeeded", "skipped")
    run.refresh_from_db()
    assert (run.status, run.error["limit"], run.error["used"]) == (RunStatus.FAILED, "max_steps", 3)


def test_a_step_past_max_steps_waits_for_approval_to_continue(drive):
    run = drive.create({"max_steps": 2, "on_exceed": "approve"})
    drive.append(run)
    drive.append(run)
    third = drive.append(run)
    assert _status(third) == "awaiting_approval"
    # One step at a time waits past the limit.
    with assert_unchanged(), pytest.raises(Conflict, match="a step past it is already waiting"):
        drive.append(run)
    drive.decide(third, "approve")
    assert _status(third) == "succeeded"
    assert _status(drive.append(run)) == "succeeded"
    assert Run.objects.get(pk=run.pk).budget_grants == 1


def test_a_passed_deadline_fails_the_next_step(drive):
    run = drive.create({"deadline": (timezone.now() + timedelta(hours=1)).isoformat()})
    drive.append(run)
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    late = drive.append(run)
    assert late.status == StepStatus.CANCELLED
    run.refresh_from_db()
    assert (run.status, run.error["limit"]) == (RunStatus.FAILED, "deadline")


def test_a_passed_deadline_waits_for_approval_and_a_grant_extends_it(drive):
    run = drive.create(
        {"deadline": (timezone.now() + timedelta(hours=1)).isoformat(), "on_exceed": "approve"}
    )
    # The deadline was an hour after creation and has just passed.
    created = timezone.now() - timedelta(hours=1, seconds=1)
    Run.objects.filter(pk=run.pk).update(created_at=created, deadline=created + timedelta(hours=1))
    late = drive.append(run)
    assert _status(late) == "awaiting_approval"
    assert late.budget_crossing["limit"] == "deadline"
    drive.decide(late, "approve")
    assert _status(late) == "succeeded"
    # The grant pushed the deadline back by its span (an hour): the next step runs.
    assert _status(drive.append(run)) == "succeeded"


@pytest.mark.parametrize(
    ("budget", "words"),
    [
        ("tight", "budget"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 10**13}, "max_tokens"),
        ({"max_cost_usd": 0}, "max_cost_usd"),
        ({"max_cost_usd": "1"}, "max_cost_usd"),
        ({"max_steps": 0}, "max_steps"),
        ({"deadline": "tomorrow"}, "deadline"),
        ({"deadline": "2030-01-01T00:00:00"}, "time zone"),
        ({"deadline": "2001-01-01T00:00:00Z"}, "already passed"),
        ({"on_exceed": "shrug"}, "on_exceed"),
        ({"max_tokens": 5, "max_tokenz": 6}, "unknown keys"),
    ],
)
def test_a_malformed_budget_is_refused_with_what_is_wrong(operator, budget, words):
    api = token_client(operator)
    with assert_unchanged():
        response = api.post(
            RUNS_URL, {"agent": "client", "goal": "g", "budget": budget}, format="json"
        )
    assert response.status_code == 400, response.json()
    assert words in str(response.json())


def test_the_api_shows_the_budget_and_refuses_two_step_limits(operator):
    api = token_client(operator)
    with assert_unchanged():
        both = api.post(
            RUNS_URL,
            {"agent": "client", "goal": "g", "step_limit": 3, "budget": {"max_steps": 4}},
            format="json",
        )
    assert both.status_code == 400
    created = api.post(
        RUNS_URL,
        {"agent": "client", "goal": "g", "budget": {"max_tokens": 5000, "max_cost_usd": 1.25}},
        format="json",
    )
    assert created.status_code == 201
    assert created.json()["budget"] == {
        "max_tokens": 5000,
        "max_cost_usd": 1.25,
        "max_steps": 500,
        "deadline": None,
        "on_exceed": "fail",
        "grants": 0,
    }
