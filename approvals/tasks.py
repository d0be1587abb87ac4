"""Celery tasks of approvals: thin wrappers that take ids and call one service."""

from celery import shared_task

from agentops.actors import Actor
from agentops.celery import send_or_drop
from approvals import notifications, reminders
from runs.tasks import DatabaseTask


@shared_task(name="approvals.send_notification", base=DatabaseTask)
def send_notification(notification_id: int) -> str:
    """Send the notification ``notification_id`` if it is due (claimed first: a repeated
    message sends nothing)."""
    return notifications.notification_send(notification_id=notification_id)


@shared_task(name="approvals.notify_due", base=DatabaseTask)
def notify_due() -> dict[str, int]:
    """Periodic (beat, every ``AGENTOPS_APPROVAL_NOTIFY_INTERVAL_SECONDS``): remind and
    escalate the pending requests whose time has come, and hand over again notifications
    whose message may be lost."""
    actor = Actor.system("approvals")
    return {
        "reminded": reminders.approval_remind_due(actor=actor),
        "escalated": reminders.approval_escalate_due(actor=actor),
        "notifications_resent": notifications.notifications_resend_due(),
    }


class CeleryNotificationSender:
    """Sends notifications (``approvals.notifications``) as ``send_notification`` tasks;
    installed by ``ApprovalsConfig.ready``. While the broker cannot be reached they are
    dropped (beat hands them over again): ``agentops.celery.send_or_drop``."""

    def send(self, notification_id: int, delay: float) -> None:
        send_or_drop(send_notification, (notification_id,), countdown=delay)
