"""Approval requests and notifications run on the database's clock: a request opened by a
worker whose clock is a minute behind does not expire early for reviewers, beat a minute
ahead neither expires nor reminds early, and it never takes back a notification another
process is still sending (``agentops.clock``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentops.actors import Actor
from agentops.clock import DatabaseNow, database_now
from approvals import notifications
from approvals.models import (
    ApprovalRequest,
    ApprovalStatus,
    Notification,
    NotificationStatus,
    RiskRule,
)
from approvals.reminders import approval_remind_due
from approvals.services import approval_decide, approval_expire_due
from tests.approvals.conftest import client_step
from testsupport.clock import clock_off_by

pytestmark = pytest.mark.django_db

SKEW = 60
TTL = timedelta(seconds=30)


@pytest.fixture
def refund_rule(seeded, webhook_server):
    """Refunds wait for one approval for 30 s, with a reminder after 20 s and a webhook."""
    return RiskRule.objects.create(
        pattern="refund_*",
        risk="high",
        priority=1,
        ttl_seconds=30,
        remind_after_seconds=20,
        webhook_urls=webhook_server.url("hook"),
    )


def test_a_request_opened_by_a_worker_whose_clock_is_behind_expires_by_the_databases_clock(
    refund_rule, operator, reviewer, django_capture_on_commit_callbacks
):
    before = database_now()
    with clock_off_by(-SKEW):
        _, step = client_step(
            operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 9}
        )
    after = database_now()
    approval = ApprovalRequest.objects.get(step=step)
    assert before + TTL <= approval.expires_at <= after + TTL
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED


def test_beat_whose_clock_is_ahead_neither_expires_nor_reminds_early(
    refund_rule, operator, django_capture_on_commit_callbacks
):
    _, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 9}
    )
    with clock_off_by(SKEW), django_capture_on_commit_callbacks(execute=False):
        assert approval_remind_due(actor=Actor.system("beat")) == 0
        assert approval_expire_due(actor=Actor.system("beat")) == 0
    approval = ApprovalRequest.objects.get(step=step)
    assert (approval.status, approval.reminded_at) == (ApprovalStatus.PENDING, None)


def test_beat_whose_clock_is_ahead_does_not_take_back_a_notification_being_sent(
    settings, refund_rule, operator, monkeypatch, django_capture_on_commit_callbacks
):
    """The claim a sender takes is a lease: beat takes it back only once it ran out by the
    database's clock, whichever hosts' clocks the sender and beat read."""
    settings.AGENTOPS_NOTIFY_CLAIM_SECONDS = 30
    client_step(operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 9})
    notification = Notification.objects.get(channel="webhook")
    # Sent at once (tasks run eagerly here): due again, as if its task had not run yet.
    Notification.objects.filter(pk=notification.pk).update(
        status=NotificationStatus.PENDING, attempts=0, sent_at=None, next_attempt_at=DatabaseNow()
    )
    seen_by_beat: list[str] = []
    deliver = notifications._deliver

    def beat_runs_while_sending(sending: Notification) -> str:
        with clock_off_by(SKEW):
            notifications.notifications_resend_due()
        seen_by_beat.append(Notification.objects.get(pk=sending.pk).status)
        return deliver(sending)

    monkeypatch.setattr(notifications, "_deliver", beat_runs_while_sending)
    with clock_off_by(-SKEW):
        assert notifications.notification_send(notification_id=notification.pk) == "sent"
    assert seen_by_beat == [NotificationStatus.SENDING]
