"""Reminders: beat reminds the approvers of a request once its time has come, once, even when
two beat runs reach it at the same moment; the reminder is audited and goes by e-mail to the
approvers and to the rule's webhook."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from agentops.actors import Actor
from approvals import tasks
from approvals.models import ApprovalRequest, Notification, RiskRule
from approvals.services import approval_decide
from audit.models import AuditEvent
from tests.approvals.conftest import client_step, group_of
from testsupport.concurrency import run_together


@pytest.fixture
def remind_rule(seeded, second_reviewer, webhook_server):
    finance = group_of("finance", second_reviewer)
    return RiskRule.objects.create(
        pattern="refund_*",
        risk="high",
        priority=1,
        approvers=finance,
        ttl_seconds=3600,
        remind_after_seconds=600,
        webhook_urls=webhook_server.url("rule"),
    )


def _reminders() -> list[mail.EmailMessage]:
    return [m for m in mail.outbox if m.subject.startswith("[agentops] Reminder")]


@pytest.mark.django_db(transaction=True)
def test_a_reminder_is_sent_once_when_beat_runs_twice_at_once(
    operator, second_reviewer, remind_rule, webhook_server, django_capture_on_commit_callbacks
):
    _run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10}
    )
    approval = ApprovalRequest.objects.get(step=step)
    assert approval.remind_at - approval.created_at == pytest.approx(
        timedelta(seconds=600), abs=timedelta(seconds=1)
    )
    # Opening told the approvers and the rule's webhook, once each.
    assert [m.to for m in mail.outbox] == [["ravi@example.com"]]
    assert webhook_server.titles("rule") == ["[agentops] Approval needed: refund_payment (high)"]

    # Not due yet: beat reminds nobody.
    assert tasks.notify_due()["reminded"] == 0
    assert _reminders() == []

    ApprovalRequest.objects.filter(pk=approval.pk).update(
        remind_at=timezone.now() - timedelta(seconds=1)
    )
    results = run_together([tasks.notify_due, tasks.notify_due])
    assert sorted(r["reminded"] for r in results) == [0, 1]

    assert [m.to for m in _reminders()] == [["ravi@example.com"]]
    assert "refund_payment" in _reminders()[0].body
    assert f"/approvals/{approval.pk}/" in _reminders()[0].body
    assert webhook_server.titles("rule")[1:] == [
        "[agentops] Reminder: approval still needed: refund_payment (high)"
    ]
    (event,) = AuditEvent.objects.filter(verb="approval.reminded")
    assert event.payload == {"groups": ["finance"], "notified": 2}
    assert Notification.objects.filter(event="reminder", status="sent").count() == 2

    # Later beats do not remind again.
    assert tasks.notify_due()["reminded"] == 0
    assert len(_reminders()) == 1
    assert ApprovalRequest.objects.get(pk=approval.pk).reminded_at is not None


@pytest.mark.django_db
def test_a_decided_request_is_not_reminded(
    operator, second_reviewer, remind_rule, django_capture_on_commit_callbacks
):
    _run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10}
    )
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(
            approval_id=step.approval.pk, actor=Actor.for_user(second_reviewer), decision="reject"
        )
    ApprovalRequest.objects.filter(pk=step.approval.pk).update(
        remind_at=timezone.now() - timedelta(seconds=1)
    )
    assert tasks.notify_due()["reminded"] == 0
    assert _reminders() == []
