"""Escalation: after the rule's delay, beat escalates a pending request to the escalation group,
whose members (reviewers of the project) may then decide it, and not before; they are told by
e-mail and the group's webhook."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from agentops.actors import Actor
from approvals import tasks
from approvals.models import ApprovalRequest, ApprovalStatus, GroupWebhooks, RiskRule
from approvals.services import approval_decide
from audit.models import AuditEvent
from projects.roles import Role
from runs.models import StepStatus
from tests.approvals.conftest import client_step, group_of
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_the_escalation_group_may_decide_after_escalation_and_not_before(
    operator, reviewer, second_reviewer, webhook_server, django_capture_on_commit_callbacks
):
    erin = make_user("erin", Role.REVIEWER)
    no_role = make_user("nadia")  # a manager with no role in the project
    finance = group_of("finance", second_reviewer)
    managers = group_of("managers", erin, no_role)
    GroupWebhooks.objects.create(group=managers, webhook_urls=webhook_server.url("managers"))
    RiskRule.objects.create(
        pattern="refund_*",
        risk="high",
        priority=1,
        approvers=finance,
        ttl_seconds=3600,
        escalate_after_seconds=1800,
        escalation_group=managers,
        description="refunds",
    )
    run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10}
    )
    approval = ApprovalRequest.objects.get(step=step)
    # Opening told finance only.
    assert [m.to for m in mail.outbox] == [["ravi@example.com"]]
    assert webhook_server.posts == []

    def decide(user):
        with django_capture_on_commit_callbacks(execute=True):
            return approval_decide(
                approval_id=approval.pk, actor=Actor.for_user(user), decision="approve"
            )

    with assert_unchanged(), pytest.raises(PermissionDenied) as refused:
        decide(erin)
    assert str(refused.value) == (
        "only members of 'finance' may decide this request until it escalates to 'managers'"
    )

    # Not due yet: nothing escalates.
    assert tasks.notify_due()["escalated"] == 0
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        escalate_at=timezone.now() - timedelta(seconds=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.notify_due()["escalated"] == 1
    assert tasks.notify_due()["escalated"] == 0

    escalated = [m for m in mail.outbox if "Escalated to you" in m.subject]
    assert [m.to for m in escalated] == [["erin@example.com"]]
    assert webhook_server.titles("managers") == [
        "[agentops] Escalated to you: approval needed: refund_payment (high)"
    ]
    (event,) = AuditEvent.objects.filter(verb="approval.escalated")
    assert event.payload == {"group": "managers", "notified": 2}

    # A manager without a role in the project still may not decide.
    with assert_unchanged(), pytest.raises(PermissionDenied, match="only reviewers"):
        decide(no_role)
    # A reviewer in neither group still may not.
    with assert_unchanged(), pytest.raises(PermissionDenied, match="'finance' or 'managers'"):
        decide(reviewer)
    decide(erin)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decisions.get().reviewer == erin
    assert run.steps.get().status == StepStatus.READY
