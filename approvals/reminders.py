"""Reminders and escalations of pending approval requests, sent by Celery beat
(``approvals.tasks``): each request is reminded and escalated once, when its time comes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from agentops.actors import Actor
from agentops.clock import database_now
from approvals.models import (
    ApprovalRequest,
    ApprovalStatus,
    NotificationEvent,
)
from approvals.notifications import notifications_record
from approvals.services import record_pending
from audit.services import audited_atomic
from runs.models import Run, Step
from runs.transitions import lock_run


def _due(field: str, done_field: str) -> list[tuple[int, Any]]:
    now = database_now()
    return list(
        ApprovalRequest.objects.filter(
            status=ApprovalStatus.PENDING,
            expires_at__gt=now,
            **{f"{field}__lte": now, f"{done_field}__isnull": True},
        )
        .order_by(field)
        .values_list("pk", "run_id")
    )


def _mark_due(
    approval_id: int, run_id: Any, done_field: str
) -> tuple[Run, Step, ApprovalRequest] | None:
    """Inside a transaction: lock the run, the step and the request (lock order of
    ``runs.transitions``) and set the request's ``done_field`` to now, unless it is no longer
    pending or another beat run set it first (then None)."""
    run = lock_run(run_id)
    step = Step.objects.select_for_update().get(approval__pk=approval_id)
    approval = ApprovalRequest.objects.select_for_update().get(pk=approval_id)
    if approval.status != ApprovalStatus.PENDING or getattr(approval, done_field) is not None:
        return None
    setattr(approval, done_field, timezone.now())
    approval.save(update_fields=[done_field])
    return run, step, approval


# What a due request gets: its time field, the field set once done, the notification sent
# and the audit event's verb.
_Due = tuple[str, str, str, str]
_REMINDER: _Due = ("remind_at", "reminded_at", NotificationEvent.REMINDER, "approval.reminded")
_ESCALATION: _Due = (
    "escalate_at",
    "escalated_at",
    NotificationEvent.ESCALATED,
    "approval.escalated",
)
# The groups a due request's notification goes to, and the audit event's payload naming them.
_Recipients = Callable[[ApprovalRequest], tuple[list[Any], dict[str, Any]]]


def _notify_due(actor: Actor, due: _Due, recipients: _Recipients) -> int:
    """Mark every request ``due`` (``_REMINDER``, ``_ESCALATION``) done, notify its
    ``recipients`` and record the audit event, each in its own transaction under its run's
    and its own row locks; how many."""
    field, done_field, event, verb = due
    done = 0
    for approval_id, run_id in _due(field, done_field):
        with audited_atomic():
            marked = _mark_due(approval_id, run_id, done_field)
            if marked is None:
                continue
            run, step, approval = marked
            groups, payload = recipients(approval)
            sent = notifications_record(
                approval=approval, run=run, step=step, event=event, groups=groups
            )
            record_pending(actor, approval, run, verb, **payload, notified=len(sent))
            done += 1
    return done


def approval_remind_due(*, actor: Actor) -> int:
    """Remind the approvers of every pending request whose ``remind_at`` has come and that was
    not reminded yet: ``reminded_at`` set, an ``approval.reminded`` audit event, and a
    reminder notification to the approvers (and the rule's webhooks). Each request in its own
    transaction, under its run's and its own row locks, so two beat runs at once remind once.
    Returns how many were reminded."""

    def approvers(approval: ApprovalRequest) -> tuple[list[Any], dict[str, Any]]:
        groups = approval.rule.deciding_groups(escalated=False)
        return groups, {"groups": groups}

    return _notify_due(actor, _REMINDER, approvers)


def approval_escalate_due(*, actor: Actor) -> int:
    """Escalate every pending request whose ``escalate_at`` has come and that has not
    escalated yet: ``escalated_at`` set (from then on members of the policy's
    ``escalation_group`` may decide too), an ``approval.escalated`` audit event, and an
    escalation notification to that group (and its and the rule's webhooks). Each request in
    its own transaction, under its run's and its own row locks, so two beat runs at once
    escalate once. Returns how many escalated."""

    def escalation_group(approval: ApprovalRequest) -> tuple[list[Any], dict[str, Any]]:
        group = approval.rule.escalation_group
        return ([group] if group else []), {"group": group}

    return _notify_due(actor, _ESCALATION, escalation_group)
