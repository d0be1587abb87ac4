"""Executing steps: timeouts, structured errors, retries used up, results that are not JSON."""

import pytest

import tests.tools  # noqa: F401  (registers the test tools)
from runs.models import RunStatus, StepStatus, ToolCall
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


def start(operator, capture, *steps):
    run = make_run(
        operator, goal="t", steps=[{"tool": tool, "args": {}} for tool in steps], capture=capture
    )
    run.refresh_from_db()
    return run


def test_a_hung_tool_times_out_and_retries_until_attempts_are_used(
    operator, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks, "test_hang")
    step = run.steps.get()
    assert step.status == StepStatus.FAILED
    assert step.attempts == 2
    assert step.error["type"] == "timeout"
    assert [a.error["type"] for a in step.attempt_set.all()] == ["timeout", "timeout"]
    assert run.status == RunStatus.FAILED
    assert run.error["type"] == "timeout"
    assert run.error["step"] == 0


def test_an_exception_is_recorded_as_a_structured_error(
    operator, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks, "test_crash")
    step = run.steps.get()
    assert step.status == StepStatus.FAILED
    error = step.error
    assert error["type"] == "ValueError"
    assert error["message"] == "boom"
    assert "Traceback" in error["traceback"]
    assert error["attempt"] == 2
    assert error["at"]


def test_a_result_that_is_not_json_fails_without_retry(
    operator, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks, "test_not_json")
    step = run.steps.get()
    assert step.status == StepStatus.FAILED
    assert step.attempts == 1
    assert step.error["type"] == "bad_result"


def test_a_failed_step_leaves_later_steps_pending_and_its_call_failed_in_the_ledger(
    operator, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks, "test_crash", "test_count")
    assert [s.status for s in run.steps.order_by("index")] == [
        StepStatus.FAILED,
        StepStatus.PENDING,
    ]
    assert list(ToolCall.objects.filter(run=run).values_list("tool", "status")) == [
        ("test_crash", "failed")
    ]


def test_every_succeeded_live_step_is_in_the_tool_call_ledger(
    operator, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks, "test_count", "test_count")
    assert run.status == RunStatus.SUCCEEDED
    keys = set(ToolCall.objects.filter(run=run).values_list("idempotency_key", flat=True))
    assert keys == set(run.steps.values_list("idempotency_key", flat=True))


def test_a_non_idempotent_tool_that_raises_is_not_retried(
    operator, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks, "test_send_crash")
    step = run.steps.get()
    assert step.status == StepStatus.FAILED
    assert step.attempts == 1
    assert step.error["outcome_unknown"] is True
    assert step.error["retryable"] is False
    # The effect may have happened: the ledger keeps the call open, never "failed".
    assert ToolCall.objects.get(step=step).status == "started"
