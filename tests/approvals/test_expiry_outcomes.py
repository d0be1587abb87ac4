"""What expiry does, by the rule's ``on_expiry``: ``reject`` refuses the call to the agent (a
client run goes on and may replan), ``fail`` fails the run even though its agent could
replan. Either way the approvers are told."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus, Notification, RiskRule
from approvals.services import approval_expire_due
from audit.models import AuditEvent
from runs.control.create import step_append
from runs.models import Run, RunStatus, Step, StepStatus
from tests.approvals.conftest import client_step, group_of

pytestmark = pytest.mark.django_db


def _expire(step: Step, capture) -> None:
    ApprovalRequest.objects.filter(step=step).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with capture(execute=True):
        assert approval_expire_due(actor=Actor.system("sweeper")) == 1


@pytest.mark.parametrize(
    ("on_expiry", "run_status"), [("reject", RunStatus.RUNNING), ("fail", RunStatus.FAILED)]
)
def test_expiry_refuses_the_call_or_fails_the_run_as_the_rule_says(
    operator, second_reviewer, seeded, django_capture_on_commit_callbacks, on_expiry, run_status
):
    finance = group_of("finance", second_reviewer)
    RiskRule.objects.create(
        pattern="refund_*", risk="high", priority=1, approvers=finance, on_expiry=on_expiry
    )
    actor = Actor.for_user(operator)
    run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10}
    )
    _expire(step, django_capture_on_commit_callbacks)

    step.refresh_from_db()
    assert step.status == StepStatus.REJECTED
    assert step.error["type"] == "approval_expired"
    assert ApprovalRequest.objects.get(step=step).status == ApprovalStatus.EXPIRED
    run = Run.objects.get(pk=run.pk)
    assert run.status == run_status
    if on_expiry == "fail":
        assert run.error["type"] == "approval_expired"
        assert (run.error["step"], run.error["tool"]) == (0, "refund_payment")
        assert run.finished_at is not None
    else:
        # The agent sees the refusal and goes on: it may append another call.
        with django_capture_on_commit_callbacks(execute=True):
            step_append(actor=actor, run_id=run.pk, tool="ask_a_human", args={}, executor="client")
        assert run.steps.count() == 2
    expired = AuditEvent.objects.get(verb="approval.expired")
    assert expired.payload == {"on_expiry": on_expiry}
    assert [m.to for m in mail.outbox if "expired" in m.subject] == [["ravi@example.com"]]
    assert Notification.objects.filter(event="expired", status="sent").count() == 1

    # The sweeper again: nothing left to expire, nobody told twice.
    with django_capture_on_commit_callbacks(execute=True):
        assert approval_expire_due(actor=Actor.system("sweeper")) == 0
    assert Notification.objects.filter(event="expired").count() == 1
