"""Reviewers' decisions: rejection, who may decide, two-person approval, expiry, cancel."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict
from approvals.models import ApprovalRequest, ApprovalStatus, RiskRule
from approvals.services import approval_decide
from runs.control.lifecycle import run_cancel
from runs.models import Run, RunStatus, StepStatus
from testsupport.factories import run_awaiting_approval
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

EMAIL = {"to": ["customer@example.com"], "subject": "Your refund", "body": "Refunded."}


def start_mail_run(requester, capture) -> Run:
    """A plan run (calculate, send_email, echo) paused at its send_email step."""
    return run_awaiting_approval(
        requester,
        capture=capture,
        before=[{"tool": "calculate", "args": {"expression": "300 - 45"}}],
        after=[{"tool": "echo", "args": {"value": "done"}}],
        args=EMAIL,
        goal="refund and tell the customer",
    )


def decide(approval: ApprovalRequest, user, decision: str, capture, comment: str = ""):
    with capture(execute=True):
        return approval_decide(
            approval_id=approval.pk,
            actor=Actor.for_user(user),
            decision=decision,
            comment=comment,
        )


def test_rejection_rejects_the_step_and_fails_the_run(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = start_mail_run(operator, django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    decide(approval, reviewer, "reject", django_capture_on_commit_callbacks, "wrong amount")
    run = Run.objects.get(pk=run.pk)
    steps = list(run.steps.order_by("index"))
    assert [s.status for s in steps] == [
        StepStatus.SUCCEEDED,
        StepStatus.REJECTED,
        StepStatus.SKIPPED,
    ]
    assert steps[1].error["message"] == "wrong amount"
    assert steps[1].error["reviewer"] == reviewer.username
    assert steps[1].result is None
    assert run.status == RunStatus.FAILED
    assert run.error["type"] == "rejected"
    assert run.error["message"] == "wrong amount"
    assert (run.error["step"], run.error["tool"]) == (1, "send_email")
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.REJECTED
    assert mail.outbox == []


def test_reviewer_may_not_decide_on_a_run_they_requested(
    reviewer, django_capture_on_commit_callbacks
):
    run = start_mail_run(reviewer, django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    with assert_unchanged(), pytest.raises(PermissionDenied, match="requested"):
        decide(approval, reviewer, "approve", django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING
    assert not approval.decisions.exists()


def test_operator_without_the_reviewer_permission_may_not_decide(
    operator, django_capture_on_commit_callbacks
):
    run = start_mail_run(operator, django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    with assert_unchanged(), pytest.raises(PermissionDenied, match="only reviewers"):
        decide(approval, operator, "approve", django_capture_on_commit_callbacks)
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_critical_step_needs_two_different_reviewers(
    operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    RiskRule.objects.create(pattern="send_email", risk="critical", priority=1)
    run = start_mail_run(operator, django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    assert (approval.risk, approval.required_approvals) == ("critical", 2)

    decide(approval, reviewer, "approve", django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING

    with assert_unchanged(), pytest.raises(Conflict, match="already decided"):
        decide(approval, reviewer, "approve", django_capture_on_commit_callbacks)
    assert approval.decisions.count() == 1

    decide(approval, second_reviewer, "approve", django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    assert len(mail.outbox) == 1
    assert {d.reviewer for d in approval.decisions.all()} == {reviewer, second_reviewer}


def test_decision_after_expiry_is_refused_and_fails_the_run(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = start_mail_run(operator, django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(Conflict, match="expired"):
        decide(approval, reviewer, "approve", django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.EXPIRED
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.FAILED
    assert run.error["type"] == "approval_expired"
    assert run.steps.get(index=1).status == StepStatus.REJECTED
    assert not approval.decisions.exists()
    assert mail.outbox == []


def test_decision_after_the_run_was_cancelled_is_refused(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = start_mail_run(operator, django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    run_cancel(run_id=run.pk, actor=Actor.for_user(operator), reason="customer called back")
    with assert_unchanged(), pytest.raises(Conflict, match="cancelled"):
        decide(approval, reviewer, "approve", django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.CANCELLED
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert mail.outbox == []
