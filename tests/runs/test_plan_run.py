"""A plan run executes its steps in order, pauses for approval and keeps every attempt."""

import pytest

from agentops.actors import Actor
from approvals.services import approval_decide
from audit.selectors import chain_verify
from runs.control.create import run_create
from runs.models import Run, RunStatus, StepStatus

pytestmark = pytest.mark.django_db


def test_low_risk_plan_runs_to_success(operator, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="add numbers",
            steps=[
                {"tool": "calculate", "args": {"expression": "2+3"}},
                {"tool": "echo", "args": {"value": {"a": 1}}},
            ],
        )
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    steps = list(run.steps.order_by("index"))
    assert [s.status for s in steps] == [StepStatus.SUCCEEDED, StepStatus.SUCCEEDED]
    assert steps[0].result == 5.0
    assert steps[1].result == {"a": 1}
    assert run.checkpoints.count() == 2
    assert chain_verify(f"run:{run.pk}").ok


def test_high_risk_step_waits_for_a_reviewer(
    operator, reviewer, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="mail",
            steps=[
                {
                    "tool": "send_email",
                    "args": {"to": ["a@example.com"], "subject": "hi", "body": "x"},
                }
            ],
        )
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    step = run.steps.get()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(
            approval_id=step.approval.pk,
            actor=Actor.for_user(reviewer),
            decision="approve",
            comment="fine",
        )
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert Run.objects.get(pk=run.pk).steps.get().result["sent"] == 1


def test_flaky_step_retries_and_keeps_attempts(operator, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="retry",
            steps=[{"tool": "flaky", "args": {"failures": 2}}],
        )
    run.refresh_from_db()
    step = run.steps.get()
    assert run.status == RunStatus.SUCCEEDED
    assert step.attempts == 3
    assert [a.status for a in step.attempt_set.all()] == ["failed", "failed", "succeeded"]
