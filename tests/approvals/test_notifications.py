"""Delivering notifications: a failing webhook is retried with backoff and each failure is
recorded; a notification is sent once however often its task runs, also by two tasks at once;
one that keeps failing ends failed; admin lists them with webhook secrets hidden."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from approvals import tasks
from approvals.models import GroupWebhooks, Notification, NotificationStatus, RiskRule
from audit.models import AuditEvent
from tests.approvals.conftest import client_step, group_of
from testsupport.concurrency import run_together

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooked_rule(seeded, webhook_server):
    return RiskRule.objects.create(
        pattern="refund_*",
        risk="high",
        priority=1,
        # Basic auth in the URL: its password is a secret.
        webhook_urls=f"json://agentops:s3cret@127.0.0.1:{webhook_server.port}/hook",
    )


def _open(operator, capture) -> Notification:
    client_step(operator, capture, "refund_payment", {"amount": 10})
    return Notification.objects.get(channel="webhook", event="opened")


def test_a_failing_webhook_is_retried_after_its_backoff_and_recorded(
    settings, operator, hooked_rule, webhook_server, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_NOTIFY_RETRY_BASE_SECONDS = 60
    webhook_server.replies = [500]
    before = timezone.now()
    notification = _open(operator, django_capture_on_commit_callbacks)
    assert len(webhook_server.posts) == 1
    assert notification.status == NotificationStatus.PENDING
    assert notification.attempts == 1
    assert "500" in notification.last_error
    assert notification.sent_at is None
    # The next attempt waits out the backoff (the retry task sent with it finds it not due).
    assert (
        before + timedelta(seconds=59)
        < notification.next_attempt_at
        < timezone.now() + timedelta(seconds=61)
    )
    assert tasks.notify_due()["notifications_resent"] == 0
    assert tasks.send_notification(notification.pk) == ""
    assert len(webhook_server.posts) == 1

    # Once due, beat hands it over again and it goes out.
    Notification.objects.filter(pk=notification.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    assert tasks.notify_due()["notifications_resent"] == 1
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.SENT
    assert notification.attempts == 2
    assert notification.sent_at is not None
    assert len(webhook_server.posts) == 2
    path, body = webhook_server.posts[1]
    assert path == "/hook"
    assert body["title"] == "[agentops] Approval needed: refund_payment (high)"
    assert "Why it waits: rule refund_*: high risk" in body["message"]

    # Sent is sent: the task again, or beat again, sends nothing more.
    assert tasks.send_notification(notification.pk) == ""
    assert tasks.notify_due()["notifications_resent"] == 0
    assert len(webhook_server.posts) == 2


def test_a_webhook_that_keeps_failing_ends_failed_after_its_attempts(
    settings, operator, hooked_rule, webhook_server, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_NOTIFY_RETRY_BASE_SECONDS = 0
    settings.AGENTOPS_NOTIFY_MAX_ATTEMPTS = 3
    webhook_server.replies = [503] * 10
    notification = _open(operator, django_capture_on_commit_callbacks)
    assert notification.status == NotificationStatus.FAILED
    assert notification.attempts == 3
    assert "503" in notification.last_error
    assert len(webhook_server.posts) == 3
    assert tasks.notify_due()["notifications_resent"] == 0
    assert len(webhook_server.posts) == 3


def test_an_unreachable_webhook_is_recorded_not_raised(
    settings, operator, seeded, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_NOTIFY_MAX_ATTEMPTS = 1
    # A port nothing listens on (the discard port on loopback).
    RiskRule.objects.create(
        pattern="refund_*", risk="high", priority=1, webhook_urls="json://127.0.0.1:9/hook"
    )
    notification = _open(operator, django_capture_on_commit_callbacks)
    assert notification.status == NotificationStatus.FAILED
    assert notification.last_error


def test_a_failing_mail_server_is_recorded(
    settings, operator, second_reviewer, seeded, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 1
    settings.AGENTOPS_NOTIFY_RETRY_BASE_SECONDS = 60
    finance = group_of("finance", second_reviewer)
    RiskRule.objects.create(pattern="refund_*", risk="high", priority=1, approvers=finance)
    client_step(operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10})
    notification = Notification.objects.get(channel="email")
    assert (notification.status, notification.attempts) == (NotificationStatus.PENDING, 1)
    assert "ConnectionRefusedError" in notification.last_error
    assert notification.target == "ravi@example.com"

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Notification.objects.update(next_attempt_at=timezone.now())
    tasks.notify_due()
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.SENT
    assert [m.to for m in mail.outbox] == [["ravi@example.com"]]


def test_admin_lists_notifications_with_webhook_secrets_hidden(
    admin_client, operator, hooked_rule, django_capture_on_commit_callbacks
):
    notification = _open(operator, django_capture_on_commit_callbacks)
    page = admin_client.get(reverse("admin:approvals_notification_changelist")).content.decode()
    assert "opened" in page.lower()
    assert "s3cret" not in page
    detail = admin_client.get(
        reverse("admin:approvals_notification_change", args=[notification.pk])
    ).content.decode()
    assert "s3cret" not in detail
    assert "[agentops] Approval needed: refund_payment (high)" in detail


@pytest.mark.django_db(transaction=True)
def test_two_tasks_sending_one_notification_at_once_send_it_once(
    settings, operator, hooked_rule, webhook_server, django_capture_on_commit_callbacks
):
    # The first attempt fails, so the notification is pending and due again at once.
    settings.AGENTOPS_NOTIFY_RETRY_BASE_SECONDS = 3600
    webhook_server.replies = [500]
    notification = _open(operator, django_capture_on_commit_callbacks)
    Notification.objects.filter(pk=notification.pk).update(next_attempt_at=timezone.now())
    results = run_together([lambda: tasks.send_notification(notification.pk)] * 2)
    assert sorted(results) == ["", NotificationStatus.SENT]
    assert len(webhook_server.posts) == 2  # the failed attempt and one send
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == (NotificationStatus.SENT, 2)


def test_a_claim_whose_worker_died_is_taken_over_after_it_runs_out(
    operator, hooked_rule, webhook_server, django_capture_on_commit_callbacks
):
    webhook_server.replies = [500]
    notification = _open(operator, django_capture_on_commit_callbacks)
    # As a worker that claimed it and died would leave it.
    claimed = Notification.objects.filter(pk=notification.pk)
    claimed.update(
        status=NotificationStatus.SENDING,
        next_attempt_at=timezone.now(),
        claimed_until=timezone.now() + timedelta(seconds=60),
    )
    assert tasks.notify_due()["notifications_resent"] == 0
    assert tasks.send_notification(notification.pk) == ""
    assert len(webhook_server.posts) == 1

    claimed.update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert tasks.notify_due()["notifications_resent"] == 1
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == (NotificationStatus.SENT, 2)
    assert len(webhook_server.posts) == 2


def test_group_webhooks_are_checked_and_their_secrets_kept_out_of_the_audit_log(
    admin_client, seeded
):
    managers = Group.objects.create(name="managers")
    url = reverse("admin:approvals_groupwebhooks_add")
    refused = admin_client.post(url, {"group": managers.pk, "webhook_urls": "https://x.test/"})
    assert refused.status_code == 200
    assert "line 1 is not a webhook URL" in refused.content.decode()
    assert not GroupWebhooks.objects.exists()

    saved = admin_client.post(
        url, {"group": managers.pk, "webhook_urls": "jsons://bot:s3cret@hooks.example.com/m"}
    )
    assert saved.status_code == 302
    assert GroupWebhooks.objects.get().group == managers
    event = AuditEvent.objects.get(verb="admin.groupwebhooks.added")
    assert "s3cret" not in str(event.payload)
    assert "hooks.example.com" in str(event.payload)
    listing = admin_client.get(reverse("admin:approvals_groupwebhooks_changelist"))
    assert "s3cret" not in listing.content.decode()
