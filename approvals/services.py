"""Every change to approval requests: the approval gate (opening, cancelling and expiring
requests), reviewers' decisions, and beat's reminders and escalations. Each records the
notifications it causes (``approvals.notifications``) in its own transaction.

Lock order as in ``runs.transitions``: the run row, then the step, then the approval request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentops.actors import Actor
from agentops.clock import database_now
from agentops.errors import Conflict, InvalidInput
from agentops.storable import require_storable
from approvals.models import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStatus,
    Decision,
    NotificationEvent,
)
from approvals.notifications import notifications_record
from approvals.policy import APPROVAL_GATE, DECIDE_PERMISSION, EXPIRY_FAILS, ApprovalPolicy
from approvals.reclassify import reclassify
from audit.services import audit_record, audited_atomic
from runs.executor.finish import fail_run_locked
from runs.executor.gates import (
    gate_edit_args_locked,
    gate_refused_locked,
    gate_satisfied_locked,
)
from runs.models import Run, Step
from runs.statuses import StepStatus
from runs.transitions import lock_run, record_transition, save_step

# The longest reviewer's comment kept (a rejection's comment is the step's error reason).
MAX_COMMENT = 5000

__all__ = [
    "DECIDE_PERMISSION",
    "ApprovalGate",
    "approval_decide",
    "approval_decide_many",
    "approval_expire_due",
    "record_pending",
]


def _record(actor: Actor, approval: ApprovalRequest, from_state: str, **payload: object) -> None:
    """Write the audit event of one transition of an approval request (``from_state`` empty
    for its creation): ``approval.<status>`` or ``approval.created``."""
    audit_record(
        actor=actor,
        verb=f"approval.{approval.status}" if from_state else "approval.created",
        object_type="approval",
        object_id=approval.pk,
        run_id=approval.run_id,
        project_id=approval.run.project_id,
        from_state=from_state,
        to_state=approval.status,
        payload=payload,
    )


class ApprovalGate:
    """The approval gate kind (``runs.gates.GateKind``): a step waits for reviewers'
    decisions on its approval request. Registered by ``ApprovalsConfig.ready``."""

    name = APPROVAL_GATE
    waiting_status = "awaiting_approval"
    waiting_label = "Awaiting approval"

    def open(self, *, run: Run, step: Step, actor: Actor) -> None:
        """Open the approval request of a step that has just moved to waiting, under the
        policy classified with the step (``Step.gate_params``): expiring after its
        ``ttl_seconds``, reminding and escalating after its delays (``remind_at``,
        ``escalate_at``; beat does it, ``approvals.reminders``),
        and notifying its approvers and webhooks."""
        policy = ApprovalPolicy.from_json(step.gate_params)
        approval = ApprovalRequest.objects.create(
            step=step,
            run=run,
            risk=step.risk,
            policy=policy.as_json(),
            # Its times from the database's clock, which every process compares them with.
            **policy.schedule(database_now()),
        )
        _record(
            actor,
            approval,
            "",
            step=step.index,
            tool=step.tool,
            risk=step.risk,
            required_approvals=policy.approvals,
            # Who may decide it (empty: any reviewer): the inbox notifies only them.
            groups=policy.deciding_groups(escalated=False),
        )
        notifications_record(
            approval=approval,
            run=run,
            step=step,
            event=NotificationEvent.OPENED,
            groups=policy.deciding_groups(escalated=False),
        )

    def cancel(self, *, run: Run, step: Step, actor: Actor) -> None:
        """Cancel the pending approval request of a step whose run is being cancelled."""
        approval = ApprovalRequest.objects.select_for_update().filter(step=step).first()
        if approval is None or approval.status != ApprovalStatus.PENDING:
            return
        approval.cancel(now=timezone.now())
        approval.save()
        _record(actor, approval, ApprovalStatus.PENDING)

    def expire_due(self, *, actor: Actor) -> int:
        """Expire every pending request past ``expires_at``, refusing its step. Returns the
        count."""
        return approval_expire_due(actor=actor)


def _expire_locked(approval: ApprovalRequest, run: Run, step: Step, actor: Actor) -> None:
    """Expire a pending request, refusing its step with ``approval_expired``, and notify who
    could decide it. Under ``on_expiry`` ``fail`` the run fails even when its agent could
    replan: its pending steps are skipped, as for an agent that cannot."""
    approval.expire(now=timezone.now())
    approval.save()
    policy = approval.rule
    _record(actor, approval, ApprovalStatus.PENDING, on_expiry=policy.on_expiry)
    when = approval.expires_at.isoformat()
    error = {
        "type": "approval_expired",
        "reason": f"no reviewer decided before {when}",
        "message": f"no reviewer decided before {when}",
    }
    if policy.on_expiry == EXPIRY_FAILS:
        step.reject(error=error, now=timezone.now())
        save_step(step, status_was=StepStatus.WAITING)
        record_transition(actor, step, StepStatus.WAITING, error=error)
        fail_run_locked(
            run, actor, {**error, "step": step.index, "tool": step.tool}, skip_pending=True
        )
    else:
        gate_refused_locked(run=run, step=step, actor=actor, error=error)
    notifications_record(
        approval=approval,
        run=run,
        step=step,
        event=NotificationEvent.EXPIRED,
        groups=policy.deciding_groups(escalated=approval.escalated),
    )


def approval_decide(
    *, approval_id: int, actor: Actor, decision: str, comment: str = "", args: Any = None
) -> ApprovalRequest:
    """Record a reviewer's decision on a pending approval request.

    ``decision`` is approve, reject or respond. One rejection rejects the request: its gate
    refuses the step, which becomes ``rejected`` with ``{"type": "rejected", "reason": comment,
    "message": comment or a default, "reviewer": name}`` as its error (a client run goes on
    with it as the call's outcome; other runs fail). A response (``respond``, its ``comment``
    required: the answer for the agent) does the same with ``"type": "responded"``. As many
    approvals from different reviewers as the request's policy requires approve it: the step
    is queued and the run continues. Who may decide is the policy's rule
    (``ApprovalPolicy.refusal``).

    An approval may come with edited ``args`` (a JSON object that passes the tool's schema):
    the step then runs with them under a new idempotency key, the audit log keeps both
    versions (``step.args_edited``), and the approvals given to the old arguments are
    discarded (``approval.approvals_discarded``). The edited call is classified again
    (``approvals.reclassify``): when it needs no stricter approval, this one counts first
    towards the request's policy; when it does, the request starts over under the stricter
    policy, and this approval does not count (its editor may not decide it).

    Raises:
        ApprovalRequest.DoesNotExist: unknown id.
        InvalidInput: ``decision`` is not approve, reject or respond, a response has no text,
            ``comment`` is not a string or longer than ``MAX_COMMENT``, ``comment`` or
            ``args`` hold what PostgreSQL cannot store (``agentops.storable``), or ``args``
            come with a rejection or a response, are not an object or fail the tool's schema.
        PermissionDenied: the policy does not let the actor decide (not a reviewer of the run's
            project, or they requested the run or the step).
        Conflict: the request is no longer pending (decided, expired, cancelled; an expired
            one is marked so first), or this reviewer already decided on it.
    """
    if decision not in Decision.values:
        raise InvalidInput(f"decision must be one of {Decision.values}", field="decision")
    if not isinstance(comment, str):
        raise InvalidInput("comment must be a string", field="comment")
    require_storable(comment, field="comment", max_length=MAX_COMMENT)
    require_storable(args, field="args")
    if args is not None and decision != Decision.APPROVE:
        raise InvalidInput("only an approval may edit the arguments", field="args")
    if decision == Decision.RESPOND and not comment.strip():
        raise InvalidInput("a response needs its text for the agent", field="comment")
    user = actor.user
    if user is None or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("only reviewers may decide approval requests")
    run_id = ApprovalRequest.objects.values_list("run_id", flat=True).get(pk=approval_id)
    with audited_atomic():
        run = lock_run(run_id)
        step = Step.objects.select_for_update().get(approval__pk=approval_id)
        approval = ApprovalRequest.objects.select_for_update().get(pk=approval_id)
        refusal = approval.rule.refusal(user=user, run=run, step=step, escalated=approval.escalated)
        if refusal:
            raise PermissionDenied(refusal)
        expired = (
            approval.status == ApprovalStatus.PENDING and approval.expires_at <= database_now()
        )
        if expired:
            # Commit the expiry (and the step's refusal) before refusing the decision.
            _expire_locked(approval, run, step, actor)
        else:
            _decide_locked(
                approval, run, step, actor, decision=decision, comment=comment, args=args
            )
    if expired:
        raise Conflict(f"approval request expired at {approval.expires_at.isoformat()}")
    return approval


# The most requests one bulk decision takes (a page of the inbox holds 25; a group, more).
MAX_BULK = 200


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk decision did: the ids of the requests it ``decided`` (in the order given),
    and why each of the others was ``refused`` (id → the refusal, in words)."""

    decided: list[int]
    refused: dict[int, str]


def approval_decide_many(
    *, approval_ids: list[int], actor: Actor, decision: str, comment: str = ""
) -> BulkOutcome:
    """Record one reviewer's decision (approve, reject or respond, with ``comment``) on each
    of ``approval_ids`` (duplicates once), each through ``approval_decide`` in its own
    transaction: the same four-eyes rule, M approvals and deciding groups per request, each
    audited on its own. A request refused (not pending, already decided by this reviewer,
    their own run, another project's, bad input) is reported and changes nothing; the others
    are applied. No request is ever left half-decided.

    Raises:
        InvalidInput: no ids, more than ``MAX_BULK``, or ``decision`` is not one of
            ``Decision`` (nothing is decided).
    """
    wanted = list(dict.fromkeys(approval_ids))
    if not wanted:
        raise InvalidInput("select at least one request", field="ids")
    if len(wanted) > MAX_BULK:
        raise InvalidInput(f"at most {MAX_BULK} requests at once", field="ids")
    if decision not in Decision.values:
        raise InvalidInput(f"decision must be one of {Decision.values}", field="decision")
    decided: list[int] = []
    refused: dict[int, str] = {}
    for approval_id in wanted:
        try:
            approval_decide(
                approval_id=approval_id, actor=actor, decision=decision, comment=comment
            )
        except ApprovalRequest.DoesNotExist:
            refused[approval_id] = "no such request"
        except (Conflict, PermissionDenied, InvalidInput) as exc:
            refused[approval_id] = str(exc)
        else:
            decided.append(approval_id)
    return BulkOutcome(decided=decided, refused=refused)


def _decide_locked(
    approval: ApprovalRequest,
    run: Run,
    step: Step,
    actor: Actor,
    *,
    decision: str,
    comment: str,
    args: Any = None,
) -> None:
    if approval.status != ApprovalStatus.PENDING:
        raise Conflict(f"approval request is {approval.status}, not pending")
    if args is not None and args != step.args:
        gate_edit_args_locked(run=run, step=step, actor=actor, args=args, reason=comment)
        earlier = approval.decisions.filter(decision=Decision.APPROVE)
        discarded = list(earlier.values_list("reviewer_name", flat=True))
        if discarded:
            earlier.delete()
            record_pending(
                actor,
                approval,
                run,
                "approval.approvals_discarded",
                reviewers=discarded,
                why="the arguments were edited",
            )
        if _reclassified_stricter_locked(approval, run, step, actor):
            return
    try:
        with transaction.atomic():
            ApprovalDecision.objects.create(
                approval=approval,
                reviewer=actor.user,
                reviewer_name=actor.name,
                decision=decision,
                comment=comment,
            )
    except IntegrityError:
        raise Conflict("you already decided on this approval request") from None
    record_pending(actor, approval, run, "approval.decision", decision=decision, comment=comment)
    now = timezone.now()
    if decision in (Decision.REJECT, Decision.RESPOND):
        approval.reject(now=now)
        approval.save()
        _record(actor, approval, ApprovalStatus.PENDING, comment=comment, decision=decision)
        gate_refused_locked(
            run=run,
            step=step,
            actor=actor,
            error={
                "type": "responded" if decision == Decision.RESPOND else "rejected",
                "reason": comment,
                "message": comment or "rejected by a reviewer",
                "reviewer": actor.name,
            },
        )
        return
    approvals = approval.decisions.filter(decision=Decision.APPROVE).count()
    if not approval.rule.is_met(approvals):
        return
    approval.approve(now=now)
    approval.save()
    _record(actor, approval, ApprovalStatus.PENDING, comment=comment)
    gate_satisfied_locked(run=run, step=step, actor=actor)


def _reclassified_stricter_locked(
    approval: ApprovalRequest, run: Run, step: Step, actor: Actor
) -> bool:
    """Classify the step's arguments, which ``actor`` has just edited, again
    (``approvals.reclassify``) and record it (``approval.reclassified``). When they need a
    stricter approval, start the request over under it (the step's risk and policy too) and
    notify its approvers; returns whether it did (the editor's approval then counts for
    nothing)."""
    found = reclassify(approval=approval, step=step, editor=actor)
    if found.stricter:
        Step.objects.filter(pk=step.pk).update(risk=found.risk, gate_params=found.policy.as_json())
        step.risk, step.gate_params = found.risk, found.policy.as_json()
        approval.restart(risk=found.risk, policy=found.policy, now=database_now())
        approval.save()
    record_pending(actor, approval, run, "approval.reclassified", **found.audit)
    if found.stricter:
        notifications_record(
            approval=approval,
            run=run,
            step=step,
            event=NotificationEvent.OPENED,
            groups=found.policy.deciding_groups(escalated=False),
        )
    return bool(found.stricter)


def approval_expire_due(*, actor: Actor) -> int:
    """Expire every pending request past ``expires_at``, each in its own transaction,
    refusing its step. Returns the count."""
    due = ApprovalRequest.objects.filter(
        status=ApprovalStatus.PENDING, expires_at__lte=database_now()
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


def record_pending(
    actor: Actor, approval: ApprovalRequest, run: Run, verb: str, **payload: object
) -> None:
    """The audit event of what leaves the request pending: a decision that does not settle
    it, discarded approvals, a re-classification, a reminder, an escalation."""
    audit_record(
        actor=actor,
        verb=verb,
        object_type="approval",
        object_id=approval.pk,
        run_id=run.pk,
        project_id=run.project_id,
        from_state=approval.status,
        to_state=approval.status,
        payload=payload,
    )
