"""Notifications about approval requests: who is told what, and sending each message once.

When a request opens, is reminded, escalates or expires, the service that changes it records
one ``Notification`` row per target in the same transaction (``notifications_record``): an
e-mail to each member of the group concerned who may decide the request (a reviewer of its
run's project, with an address), and a post to each webhook of that group
(``GroupWebhooks``) and of the rule that classified the call (``RiskRule.webhook_urls``).
After commit a task sends each one (``notification_send``), claiming its row first, so a
repeated task sends nothing; a failure is retried with exponential backoff and recorded.

E-mail goes through Django's ``send_mail`` (the ``EMAIL_*`` settings, the same backend as the
rest of the site: console in development, locmem in tests, SMTP in production) rather than
apprise's ``mailto://``, which would need the SMTP credentials a second time, inside URLs.
Webhooks go through apprise (``json://host/path``, ``slack://...``, any service it knows).

The task that sends is an edge: ``ApprovalsConfig.ready`` installs it (``install``).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

import apprise
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.urls import reverse

from agentops.clock import DatabaseNow, database_now
from approvals.models import (
    ApprovalRequest,
    GroupWebhooks,
    Notification,
    NotificationChannel,
    NotificationEvent,
    NotificationStatus,
    RiskRule,
    webhook_list,
)
from approvals.policy import DECIDE_PERMISSION
from projects.access import Access

if TYPE_CHECKING:
    from runs.models import Run, Step

logger = logging.getLogger(__name__)

# The longest error text kept on a notification (characters).
MAX_ERROR = 2000


class NotificationSender(Protocol):
    """What hands a notification to the workers."""

    def send(self, notification_id: int, delay: float) -> None:
        """Send the notification ``notification_id`` in ``delay`` seconds."""


_installed: list[NotificationSender] = []


def install(sender: NotificationSender) -> None:
    """Make ``sender`` the one that sends notifications (at start-up)."""
    _installed[:] = [sender]


def _sender() -> NotificationSender:
    if not _installed:
        raise ImproperlyConfigured("no notification sender installed: is approvals loaded?")
    return _installed[0]


def send_on_commit(notification_id: int, delay: float = 0) -> None:
    """Send the notification ``notification_id`` (in ``delay`` seconds) once the transaction
    commits; a failure to hand it to the sender (the broker down) is logged, not raised: the
    change that made it is committed."""
    transaction.on_commit(lambda: _sender().send(notification_id, delay), robust=True)


def _members(group: str, run: Run) -> list[tuple[int, str, str]]:
    """``(user id, username, e-mail)`` of the active members of the group named ``group`` with
    an e-mail address who may decide approval requests of ``run``'s project."""
    members = get_user_model().objects.filter(groups__name=group, is_active=True)
    found = []
    for user in members.exclude(email="").order_by("pk"):
        if Access(user).can(DECIDE_PERMISSION, run.project_id):
            found.append((user.pk, user.get_username(), user.email))
    return found


def _webhooks(groups: list[str], rule_id: int | None) -> list[str]:
    urls: list[str] = []
    for text in GroupWebhooks.objects.filter(group__name__in=groups).values_list(
        "webhook_urls", flat=True
    ):
        urls.extend(webhook_list(text))
    if rule_id is not None:
        rule_urls = RiskRule.objects.filter(pk=rule_id).values_list("webhook_urls", flat=True)
        for text in rule_urls:
            urls.extend(webhook_list(text))
    return list(dict.fromkeys(urls))


def inbox_link(approval: ApprovalRequest) -> str:
    """The address of ``approval``'s own page (``/approvals/<id>/``; absolute when
    ``AGENTOPS_PUBLIC_URL`` is set): it opens that request wherever it is in the inbox."""
    path = reverse("approval-detail", args=[approval.pk])
    return f"{settings.AGENTOPS_PUBLIC_URL.rstrip('/')}{path}"


_HEADLINES = {
    NotificationEvent.OPENED: "Approval needed",
    NotificationEvent.REMINDER: "Reminder: approval still needed",
    NotificationEvent.ESCALATED: "Escalated to you: approval needed",
    NotificationEvent.EXPIRED: "Approval request expired",
}


def _message(event: str, approval: ApprovalRequest, run: Run, step: Step) -> tuple[str, str]:
    policy = approval.rule
    subject = f"[agentops] {_HEADLINES[NotificationEvent(event)]}: {step.tool} ({approval.risk})"
    lines = [
        f"Run: {run.goal[:200]}",
        f"Step #{step.index}: {step.tool}, {approval.risk} risk",
        f"Why it waits: {policy.reason or 'its risk'}",
        f"Approvals needed: {policy.approvals}",
    ]
    if event == NotificationEvent.EXPIRED:
        outcome = "the run fails" if policy.on_expiry == "fail" else "the call is refused"
        lines.append(f"Nobody decided before {approval.expires_at.isoformat()}: {outcome}.")
    else:
        lines.append(f"Expires: {approval.expires_at.isoformat()}")
        lines.append(f"Decide: {inbox_link(approval)}")
    return subject[:250], "\n".join(lines)


def notifications_record(
    *, approval: ApprovalRequest, run: Run, step: Step, event: str, groups: list[str]
) -> list[int]:
    """Record the notifications of ``event`` (a ``NotificationEvent``) about ``approval`` of
    ``step`` of ``run`` for the groups named ``groups`` (their members by e-mail and their
    webhooks) and the webhooks of the rule that classified the call, and send each after
    commit. A target already notified of this event is skipped. Returns the new rows' ids.

    Call inside the transaction that changes the request, with it locked.
    """
    subject, body = _message(event, approval, run, step)
    targets: list[tuple[str, int | None, str, str]] = []
    for group in dict.fromkeys(groups):
        for member_id, username, email in _members(group, run):
            targets.append((NotificationChannel.EMAIL, member_id, username, email))
    for url in _webhooks(list(groups), approval.rule.rule_id):
        targets.append((NotificationChannel.WEBHOOK, None, "", url))
    created = []
    for channel, user_id, name, target in targets:
        try:
            # A savepoint: a target already notified of this event (unique constraint) must
            # not abort the caller's transaction.
            with transaction.atomic():
                notification = Notification.objects.create(
                    approval=approval,
                    event=event,
                    channel=channel,
                    recipient_id=user_id,
                    recipient_name=name,
                    target=target,
                    subject=subject,
                    body=body,
                    next_attempt_at=DatabaseNow(),
                )
        except IntegrityError:
            continue
        created.append(notification.pk)
        send_on_commit(notification.pk)
    return created


def _deliver(notification: Notification) -> str:
    """Send ``notification`` now; the error text ("" when it was sent)."""
    if notification.channel == NotificationChannel.EMAIL:
        try:
            send_mail(
                notification.subject,
                notification.body,
                settings.DEFAULT_FROM_EMAIL,
                [notification.target],
                fail_silently=False,
            )
        except Exception as exc:  # any backend's failure (SMTP, socket, ...) is recorded
            return f"{type(exc).__name__}: {exc}"
        return ""
    service = apprise.Apprise.instantiate(notification.target)
    if service is None:
        return "not a webhook URL apprise knows"
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as captured:
        sent = service.notify(body=notification.body, title=notification.subject)
    if sent:
        return ""
    return captured.getvalue().strip() or "the webhook refused the notification"


def backoff_seconds(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones:
    ``AGENTOPS_NOTIFY_RETRY_BASE_SECONDS`` doubled per attempt, at most
    ``AGENTOPS_NOTIFY_RETRY_MAX_SECONDS``."""
    base = settings.AGENTOPS_NOTIFY_RETRY_BASE_SECONDS
    return float(min(base * 2 ** max(attempts - 1, 0), settings.AGENTOPS_NOTIFY_RETRY_MAX_SECONDS))


def notification_send(*, notification_id: int) -> str:
    """Send the notification ``notification_id`` if it is due, and record the outcome; returns
    its status afterwards (``""`` when there was nothing to do).

    Claims the row first (``pending`` and due → ``sending``, one more attempt, a conditional
    update), so two tasks never both send it. On success it is ``sent`` (``sent_at``); on
    failure ``last_error`` keeps why, and it goes back to ``pending`` after
    ``backoff_seconds`` (a task is scheduled for then), or ``failed`` after
    ``AGENTOPS_NOTIFY_MAX_ATTEMPTS`` attempts.
    """
    # Due and claimed by the database's clock: the claim is a lease that beat, on another
    # host, takes back once it runs out (``notifications_resend_due``).
    claimed = Notification.objects.filter(
        pk=notification_id, status=NotificationStatus.PENDING, next_attempt_at__lte=Now()
    ).update(
        status=NotificationStatus.SENDING,
        attempts=F("attempts") + 1,
        claimed_until=DatabaseNow() + timedelta(seconds=settings.AGENTOPS_NOTIFY_CLAIM_SECONDS),
    )
    if not claimed:
        return ""
    notification = Notification.objects.get(pk=notification_id)
    error = _deliver(notification)[:MAX_ERROR]
    mine = Notification.objects.filter(pk=notification_id, status=NotificationStatus.SENDING)
    if not error:
        mine.update(status=NotificationStatus.SENT, sent_at=DatabaseNow(), claimed_until=None)
        return NotificationStatus.SENT
    logger.warning(
        "notification %s failed (attempt %s): %s", notification_id, notification.attempts, error
    )
    if notification.attempts >= settings.AGENTOPS_NOTIFY_MAX_ATTEMPTS:
        mine.update(status=NotificationStatus.FAILED, last_error=error, claimed_until=None)
        return NotificationStatus.FAILED
    delay = backoff_seconds(notification.attempts)
    mine.update(
        status=NotificationStatus.PENDING,
        last_error=error,
        next_attempt_at=DatabaseNow() + timedelta(seconds=delay),
        claimed_until=None,
    )
    _sender().send(notification_id, delay)
    return NotificationStatus.PENDING


def notifications_resend_due() -> int:
    """Hand the workers again every notification whose message may be lost: pending and due
    (its task was lost, or its retry's), or claimed by a worker that died (its claim ran out:
    it goes back to pending, so it may arrive twice), both by the database's clock. Returns
    how many were handed over."""
    now = database_now()
    Notification.objects.filter(status=NotificationStatus.SENDING, claimed_until__lt=now).update(
        status=NotificationStatus.PENDING, claimed_until=None
    )
    due = list(
        Notification.objects.filter(
            status=NotificationStatus.PENDING, next_attempt_at__lte=now
        ).values_list("pk", flat=True)[: settings.AGENTOPS_NOTIFY_BATCH]
    )
    for notification_id in due:
        _sender().send(notification_id, 0)
    return len(due)
