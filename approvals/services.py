"""Every change to approval requests: opening, deciding, expiring and cancelling them.

Lock order as in ``runs.services``: the run row, then the step, then the approval request.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, Decision
from audit.services import audit_record, audited_atomic
from runs.models import Run, RunStatus, Step, StepStatus
from runs.services import (
    enqueue_step_on_commit,
    fail_run_locked,
    lock_run,
    record_transition,
    save_run,
    save_step,
    skip_pending_locked,
)

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


def approval_open_locked(*, run: Run, step: Step, actor: Actor) -> ApprovalRequest:
    """Open the approval request of a step that has just moved to awaiting_approval.

    The caller holds the run's lock. The request expires after
    ``AGENTOPS_APPROVAL_TTL_SECONDS`` (seconds).
    """
    approval = ApprovalRequest.objects.create(
        step=step,
        run=run,
        risk=step.risk,
        required_approvals=step.required_approvals,
        expires_at=timezone.now() + timedelta(seconds=settings.AGENTOPS_APPROVAL_TTL_SECONDS),
    )
    record_transition(
        actor,
        approval,
        "",
        step=step.index,
        tool=step.tool,
        risk=step.risk,
        required_approvals=approval.required_approvals,
    )
    return approval


def approval_cancel_locked(*, step: Step, actor: Actor) -> None:
    """Cancel the pending approval request of a step whose run is being cancelled."""
    approval = ApprovalRequest.objects.select_for_update().filter(step=step).first()
    if approval is None or approval.status != ApprovalStatus.PENDING:
        return
    approval.cancel(now=timezone.now())
    approval.save()
    record_transition(actor, approval, ApprovalStatus.PENDING)


def _close(approval: ApprovalRequest, run: Run, step: Step, actor: Actor, *, error: dict) -> None:
    """Reject the step and fail the run after a rejection or expiry (caller holds the locks)."""
    now = timezone.now()
    step.reject(error=error, now=now)
    save_step(step, status_was=StepStatus.AWAITING_APPROVAL)
    record_transition(actor, step, StepStatus.AWAITING_APPROVAL, error=error)
    # A rejected or expired step is final (the run cannot be resumed past it): nothing after
    # it will run.
    skip_pending_locked(run, actor)
    fail_run_locked(run, actor, {**error, "step": step.index, "tool": step.tool})


def _expire_locked(approval: ApprovalRequest, run: Run, step: Step, actor: Actor) -> None:
    approval.expire(now=timezone.now())
    approval.save()
    record_transition(actor, approval, ApprovalStatus.PENDING)
    _close(
        approval,
        run,
        step,
        actor,
        error={
            "type": "approval_expired",
            "message": f"no reviewer decided before {approval.expires_at.isoformat()}",
        },
    )


def approval_decide(
    *, approval_id: int, actor: Actor, decision: str, comment: str = ""
) -> ApprovalRequest:
    """Record a reviewer's decision on a pending approval request.

    ``decision`` is approve or reject. One rejection rejects the request: the step becomes
    ``rejected`` with the comment as its error and the run ``failed``. Approvals from
    ``required_approvals`` different reviewers approve it: the step is queued and the run
    continues.

    Raises:
        ApprovalRequest.DoesNotExist: unknown id.
        InvalidInput: ``decision`` is not approve or reject, or ``comment`` is not a string.
        PermissionDenied: the actor lacks the reviewer permission, or requested the run.
        Conflict: the request is no longer pending (decided, expired, cancelled; an expired
            one is marked so first), or this reviewer already decided on it.
    """
    if decision not in Decision.values:
        raise InvalidInput(f"decision must be one of {Decision.values}", field="decision")
    if not isinstance(comment, str):
        raise InvalidInput("comment must be a string", field="comment")
    user = actor.user
    if user is None or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("only reviewers may decide approval requests")
    run_id = ApprovalRequest.objects.values_list("run_id", flat=True).get(pk=approval_id)
    with audited_atomic():
        run = lock_run(run_id)
        step = Step.objects.select_for_update().get(approval__pk=approval_id)
        approval = ApprovalRequest.objects.select_for_update().get(pk=approval_id)
        if run.requested_by_id is not None and run.requested_by_id == user.pk:
            raise PermissionDenied("a reviewer may not decide on a run they requested")
        expired = (
            approval.status == ApprovalStatus.PENDING and approval.expires_at <= timezone.now()
        )
        if expired:
            # Commit the expiry (and the run's failure) before refusing the decision.
            _expire_locked(approval, run, step, actor)
        else:
            _decide_locked(approval, run, step, actor, decision=decision, comment=comment)
    if expired:
        raise Conflict(f"approval request expired at {approval.expires_at.isoformat()}")
    return approval


def _decide_locked(
    approval: ApprovalRequest, run: Run, step: Step, actor: Actor, *, decision: str, comment: str
) -> None:
    if approval.status != ApprovalStatus.PENDING:
        raise Conflict(f"approval request is {approval.status}, not pending")
    user = actor.user
    try:
        with transaction.atomic():
            ApprovalDecision.objects.create(
                approval=approval,
                reviewer=user,
                reviewer_name=actor.name,
                decision=decision,
                comment=comment,
            )
    except IntegrityError:
        raise Conflict("you already decided on this approval request") from None
    audit_record(
        actor=actor,
        verb="approval.decision",
        object_type="approval",
        object_id=approval.pk,
        run_id=run.pk,
        from_state=approval.status,
        to_state=approval.status,
        payload={"decision": decision, "comment": comment},
    )
    now = timezone.now()
    if decision == Decision.REJECT:
        approval.reject(now=now)
        approval.save()
        record_transition(actor, approval, ApprovalStatus.PENDING, comment=comment)
        _close(
            approval,
            run,
            step,
            actor,
            error={
                "type": "rejected",
                "message": comment or "rejected by a reviewer",
                "reviewer": actor.name,
            },
        )
        return
    approvals = approval.decisions.filter(decision=Decision.APPROVE).count()
    if approvals < approval.required_approvals:
        return
    approval.approve(now=now)
    approval.save()
    record_transition(actor, approval, ApprovalStatus.PENDING, comment=comment)
    step.enqueue()
    save_step(step, status_was=StepStatus.AWAITING_APPROVAL)
    record_transition(actor, step, StepStatus.AWAITING_APPROVAL)
    run.continue_approved()
    save_run(run)
    record_transition(actor, run, RunStatus.AWAITING_APPROVAL)
    enqueue_step_on_commit(step.pk)


def approval_expire_due(*, actor: Actor) -> int:
    """Expire every pending request past ``expires_at``, failing its run. Returns the count."""
    due = ApprovalRequest.objects.filter(
        status=ApprovalStatus.PENDING, expires_at__lte=timezone.now()
    ).values_list("pk", "run_id")
    expired = 0
    for approval_id, run_id in due:
        with audited_atomic():
            run = lock_run(run_id)
            step = Step.objects.select_for_update().get(approval__pk=approval_id)
            approval = ApprovalRequest.objects.select_for_update().get(pk=approval_id)
            if approval.status == ApprovalStatus.PENDING:
                _expire_locked(approval, run, step, actor)
                expired += 1
    return expired
