"""A reviewer's own marks on a pending approval request: snooze it (hidden from their inbox
until a time) and assign it to themselves. Each change is one transaction under the run's row
lock (the lock order of ``runs.transitions``), audited on the run's chain."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied

from agentops.actors import Actor
from agentops.clock import database_now
from agentops.errors import Conflict, InvalidInput
from approvals.models import ApprovalMark, ApprovalRequest, ApprovalStatus
from audit.services import audit_record, audited_atomic
from projects.access import Access
from runs.transitions import lock_run

# The longest snooze: a request rarely lives longer (``AGENTOPS_APPROVAL_TTL_SECONDS``).
MAX_SNOOZE = timedelta(days=7)


def _mark_locked(approval_id: int, actor: Actor) -> tuple[ApprovalRequest, ApprovalMark]:
    user = actor.user
    if user is None:
        raise PermissionDenied("only a signed-in user has an inbox")
    run_id = ApprovalRequest.objects.values_list("run_id", flat=True).get(pk=approval_id)
    lock_run(run_id)
    approval = ApprovalRequest.objects.select_for_update().select_related("run").get(pk=approval_id)
    project_id = approval.run.project_id
    if project_id is None or not Access(user).can("approvals.view_approvalrequest", project_id):
        raise ApprovalRequest.DoesNotExist(f"no approval request {approval_id}")
    if approval.status != ApprovalStatus.PENDING:
        raise Conflict(f"approval request is {approval.status}, not pending")
    mark, _ = ApprovalMark.objects.select_for_update().get_or_create(approval=approval, user=user)
    return approval, mark


def _record(actor: Actor, approval: ApprovalRequest, verb: str, **payload: object) -> None:
    audit_record(
        actor=actor,
        verb=verb,
        object_type="approval",
        object_id=approval.pk,
        run_id=approval.run_id,
        project_id=approval.run.project_id,
        from_state=approval.status,
        to_state=approval.status,
        payload=payload,
    )


def approval_snooze(*, approval_id: int, actor: Actor, until: datetime | None) -> ApprovalMark:
    """Hide a pending request from ``actor``'s inbox until ``until`` (aware; None: show it
    again now), audited as ``approval.snoozed`` or ``approval.unsnoozed``.

    Raises:
        ApprovalRequest.DoesNotExist: no such request, or one in a project the actor may not
            see.
        InvalidInput: ``until`` is not in the future, or further than ``MAX_SNOOZE``.
        Conflict: the request is no longer pending.
        PermissionDenied: the actor is not a signed-in user.
    """
    if until is not None:
        now = database_now()
        if until <= now or until - now > MAX_SNOOZE:
            raise InvalidInput("snooze until a time in the next 7 days", field="until")
    with audited_atomic():
        approval, mark = _mark_locked(approval_id, actor)
        mark.snoozed_until = until
        mark.save(update_fields=["snoozed_until"])
        if until is None:
            _record(actor, approval, "approval.unsnoozed")
        else:
            _record(actor, approval, "approval.snoozed", until=until.isoformat())
    return mark


def approval_assign(*, approval_id: int, actor: Actor, assigned: bool) -> ApprovalMark:
    """Assign a pending request to ``actor`` ("assign to me"; ``assigned`` False: take it
    back), audited as ``approval.assigned`` or ``approval.unassigned``. Deciding stays open to
    every reviewer the policy allows.

    Raises:
        ApprovalRequest.DoesNotExist: no such request, or one in a project the actor may not
            see.
        Conflict: the request is no longer pending.
        PermissionDenied: the actor is not a signed-in user.
    """
    with audited_atomic():
        approval, mark = _mark_locked(approval_id, actor)
        mark.assigned_at = database_now() if assigned else None
        mark.save(update_fields=["assigned_at"])
        _record(actor, approval, "approval.assigned" if assigned else "approval.unassigned")
    return mark
