"""Operators cancel active runs and resume failed ones from the step that failed."""

from __future__ import annotations

import pytest
from django_fsm import TransitionNotAllowed

from agentops.actors import Actor
from agentops.errors import Conflict
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_decide
from runs.control.lifecycle import run_cancel, run_resume
from runs.models import Run, RunStatus, StepStatus, ToolCall
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

EMAIL = {"to": ["customer@example.com"], "subject": "Hello", "body": "Hi."}


def create(operator, steps, capture=None) -> Run:
    """A plan run; started (on-commit work executed) only when ``capture`` is given."""
    run = make_run(operator, goal="test", steps=steps, capture=capture)
    return Run.objects.get(pk=run.pk)


def statuses(run: Run) -> list[str]:
    return list(run.steps.order_by("index").values_list("status", flat=True))


def test_cancelling_a_queued_run_cancels_its_pending_steps(operator):
    # Without executing on-commit work the run is never started: it stays queued.
    run = create(operator, [{"tool": "echo", "args": {"value": 1}}] * 2)
    assert run.status == RunStatus.QUEUED
    run_cancel(run_id=run.pk, actor=Actor.for_user(operator), reason="not needed")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.CANCELLED
    assert run.error == {"type": "cancelled", "message": "not needed", "by": operator.username}
    assert run.finished_at is not None
    assert statuses(run) == [StepStatus.CANCELLED, StepStatus.CANCELLED]


def test_cancelling_an_awaiting_run_cancels_open_steps_and_the_approval(
    operator, django_capture_on_commit_callbacks
):
    steps = [
        {"tool": "calculate", "args": {"expression": "1+1"}},
        {"tool": "send_email", "args": EMAIL},
        {"tool": "echo", "args": {"value": 1}},
    ]
    run = create(operator, steps, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.WAITING
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run_id=run.pk, actor=Actor.for_user(operator))
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.CANCELLED
    assert statuses(run) == [StepStatus.SUCCEEDED, StepStatus.CANCELLED, StepStatus.CANCELLED]
    assert ApprovalRequest.objects.get(run=run).status == ApprovalStatus.CANCELLED


def test_cancelling_twice_is_not_allowed(operator):
    run = create(operator, [{"tool": "echo", "args": {"value": 1}}])
    run_cancel(run_id=run.pk, actor=Actor.for_user(operator))
    with assert_unchanged(), pytest.raises(TransitionNotAllowed):
        run_cancel(run_id=run.pk, actor=Actor.for_user(operator))
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_failed_run_resumes_from_the_failed_step_without_rerunning_earlier_ones(
    operator, django_capture_on_commit_callbacks
):
    # flaky allows 5 attempts; 10 planned failures use up the first 5 and the 5 more that
    # resuming grants, so it takes a second resume to get through.
    steps = [
        {"tool": "calculate", "args": {"expression": "2*21"}},
        {"tool": "flaky", "args": {"failures": 10}},
        {"tool": "echo", "args": {"value": "after"}},
    ]
    run = create(operator, steps, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED
    assert statuses(run) == [StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.PENDING]
    assert run.error["type"] == "tool_error"
    assert (run.error["step"], run.error["tool"]) == (1, "flaky")
    flaky = run.steps.get(index=1)
    assert (flaky.attempts, flaky.max_attempts) == (5, 5)

    for expected_status, expected_attempts in [
        (RunStatus.FAILED, 10),
        (RunStatus.SUCCEEDED, 11),
    ]:
        with django_capture_on_commit_callbacks(execute=True):
            run_resume(run_id=run.pk, actor=Actor.for_user(operator))
        run = Run.objects.get(pk=run.pk)
        assert run.status == expected_status
        assert run.steps.get(index=1).attempts == expected_attempts

    first, flaky, last = run.steps.order_by("index")
    assert statuses(run) == [StepStatus.SUCCEEDED] * 3
    assert (first.attempts, first.attempt_set.count()) == (1, 1)
    assert ToolCall.objects.filter(step=first).count() == 1
    assert [a.status for a in flaky.attempt_set.all()] == ["failed"] * 10 + ["succeeded"]
    assert (flaky.result, last.result) == ("ok", "after")
    assert run.error is None


def test_resuming_a_rejected_run_is_a_conflict(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = create(
        operator, [{"tool": "send_email", "args": EMAIL}], django_capture_on_commit_callbacks
    )
    approval_decide(
        approval_id=ApprovalRequest.objects.get(run=run).pk,
        actor=Actor.for_user(reviewer),
        decision="reject",
        comment="no",
    )
    with assert_unchanged(), pytest.raises(Conflict, match="rejected"):
        run_resume(run_id=run.pk, actor=Actor.for_user(operator))
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_a_rejected_run_with_skipped_steps_after_it_is_not_resumed_into_success(
    operator, reviewer, django_capture_on_commit_callbacks
):
    """The finding: a run whose step #0 was rejected and whose later steps were skipped
    resumed to ``succeeded`` with the rejection gone (the resume looked at the last skipped
    step, not at the rejected one)."""
    echo = {"tool": "echo", "args": {"value": 1}}
    run = create(
        operator,
        [{"tool": "send_email", "args": EMAIL}, echo, echo],
        django_capture_on_commit_callbacks,
    )
    approval_decide(
        approval_id=ApprovalRequest.objects.get(run=run).pk,
        actor=Actor.for_user(reviewer),
        decision="reject",
        comment="no",
    )
    assert statuses(run) == ["rejected", "skipped", "skipped"]
    with assert_unchanged(), pytest.raises(Conflict, match="rejected"):
        run_resume(run_id=run.pk, actor=Actor.for_user(operator))
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_resuming_a_run_that_has_not_failed_is_not_allowed(
    operator, django_capture_on_commit_callbacks
):
    run = create(
        operator, [{"tool": "echo", "args": {"value": 1}}], django_capture_on_commit_callbacks
    )
    assert run.status == RunStatus.SUCCEEDED
    with assert_unchanged(), pytest.raises(TransitionNotAllowed):
        run_resume(run_id=run.pk, actor=Actor.for_user(operator))
