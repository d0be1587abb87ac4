"""Validators after steps: a result that fails its tool's validator fails the attempt (retried
when declared: the tool is called again), or is held at a gate for a reviewer who accepts or
rejects it; the ledger records the result either way, and nothing repeats a side effect
unasked."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import Run, RunStatus, Step, StepAttempt, StepStatus, ToolCall
from runs.tools import Validator
from tests.tools import EFFECTS
from testsupport.factories import plan_run

pytestmark = pytest.mark.django_db


def calls(step: Step) -> int:
    return len(EFFECTS.get(step.idempotency_key, []))


def held(user, capture, status: str) -> Step:
    """The held first step of a plan run whose lookup answered ``status`` (not ok: its
    validator holds it for a reviewer), then an echo."""
    steps = [
        {"tool": "test_lookup", "args": {"status": status}},
        {"tool": "echo", "args": {"value": 1}},
    ]
    run = plan_run(user, steps, capture=capture)
    assert run.status_info.value == "awaiting_approval"
    return run.steps.get(index=0)


def test_a_result_that_fails_then_passes_on_the_declared_retry(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [{"tool": "test_quote", "args": {"item": "a"}}],
        capture=django_capture_on_commit_callbacks,
    )
    assert run.status == RunStatus.SUCCEEDED
    step = run.steps.get()
    assert (step.status, step.result, step.attempts, calls(step)) == (
        StepStatus.SUCCEEDED,
        {"price": 10},
        2,
        2,
    )
    first, second = StepAttempt.objects.filter(step=step).order_by("number")
    assert first.error["type"] == "validation_failed"
    assert (first.error["rule"], first.error["path"], first.error["retryable"]) == (
        "price is positive",
        "(root)",
        True,
    )
    assert second.error is None
    assert ToolCall.objects.get(idempotency_key=step.idempotency_key).result == {"price": 10}


def test_a_failed_check_without_retry_fails_the_run_and_keeps_the_result(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [{"tool": "test_number", "args": {"n": 3}}, {"tool": "echo", "args": {"value": 1}}],
        capture=django_capture_on_commit_callbacks,
    )
    assert run.status == RunStatus.FAILED
    step = run.steps.get(index=0)
    assert step.status == StepStatus.FAILED
    assert step.error["type"] == "validation_failed"
    assert step.error["rule"] == "result is even"
    assert "3 is odd" in step.error["message"]
    assert calls(step) == 1
    call = ToolCall.objects.get(idempotency_key=step.idempotency_key)
    assert (call.status, call.result) == ("invalid", 3)


def test_a_gated_result_accepted_by_a_reviewer_succeeds_without_a_second_call(
    operator, reviewer, django_capture_on_commit_callbacks
):
    step = held(operator, django_capture_on_commit_callbacks, "partial")
    run = step.run
    assert step.status_info.value == "awaiting_approval"
    assert step.result == {"status": "partial"}
    assert (step.error["rule"], step.error["path"]) == ("status is ok", "status")
    approval = ApprovalRequest.objects.get(step=step)
    assert "its result failed validation" in approval.policy["reason"]
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")
    run = Run.objects.get(pk=run.pk)
    step = Step.objects.get(pk=step.pk)
    assert run.status == RunStatus.SUCCEEDED
    assert (step.status, step.result, step.error, calls(step)) == (
        StepStatus.SUCCEEDED,
        {"status": "partial"},
        None,
        1,
    )
    assert ToolCall.objects.get(idempotency_key=step.idempotency_key).status == "succeeded"


def test_a_gated_result_rejected_by_a_reviewer_fails_the_run(
    operator, reviewer, django_capture_on_commit_callbacks
):
    step = held(operator, django_capture_on_commit_callbacks, "broken")
    run = step.run
    approval = ApprovalRequest.objects.get(step=step)
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(
            approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="reject", comment="no"
        )
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.FAILED
    assert Step.objects.get(pk=step.pk).status == StepStatus.REJECTED
    assert run.steps.get(index=1).status == StepStatus.SKIPPED
    assert calls(step) == 1
    call = ToolCall.objects.get(idempotency_key=step.idempotency_key)
    assert (call.status, call.result) == ("invalid", {"status": "broken"})


def test_a_passing_result_is_not_held(operator, django_capture_on_commit_callbacks):
    run = plan_run(
        operator,
        [{"tool": "test_lookup", "args": {"status": "ok"}}],
        capture=django_capture_on_commit_callbacks,
    )
    assert run.status == RunStatus.SUCCEEDED
    assert not ApprovalRequest.objects.filter(step__run=run).exists()


def test_a_validator_declares_exactly_one_check():
    with pytest.raises(ValueError, match="one of schema, check, condition"):
        Validator("none")
    with pytest.raises(ValueError, match="one of schema, check, condition"):
        Validator("two", condition="x > 1", check="a.b")
    with pytest.raises(ValueError, match="schema"):
        Validator("bad", schema={"type": 5})
    with pytest.raises(ValueError, match="on_failure"):
        Validator("gate and retry", condition="x", on_failure="gate", retry=True)


def test_the_reviewer_sees_the_held_result_and_the_failed_rule(
    client, operator, reviewer, django_capture_on_commit_callbacks
):
    step = held(operator, django_capture_on_commit_callbacks, "<b>late</b>")
    approval = ApprovalRequest.objects.get(step=step)
    client.force_login(reviewer)
    page = client.get(reverse("approval-detail", args=[approval.pk])).content.decode()
    inbox = client.get(reverse("approval-inbox")).content.decode()
    for shown in (page, inbox):
        assert "it failed “status is ok” at status" in shown
        assert "&lt;b&gt;late&lt;/b&gt;" in shown
        assert "<b>late</b>" not in shown
