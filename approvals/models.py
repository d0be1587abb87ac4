"""Approval requests for risky steps, reviewers' decisions and the risk policy."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from agentops.statuses import StatusInfo, status_map
from approvals.policy import ApprovalPolicy
from runs.models import Risk


class RiskRule(models.Model):
    """An admin-editable rule classifying tools by name.

    ``pattern`` is a shell-style pattern (``fnmatch``: ``book_*``, ``calculate``) matched against
    the tool name; the enabled rule with the lowest ``priority`` that matches wins over the
    tool's declared risk. ``required_approvals`` overrides the default count (1 for high, 2 for
    critical) when set.
    """

    pattern = models.CharField(max_length=128)
    risk = models.CharField(max_length=16, choices=Risk.choices)
    required_approvals = models.PositiveSmallIntegerField(null=True, blank=True)
    priority = models.PositiveIntegerField(default=100, help_text="Lower wins.")
    enabled = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["priority", "pattern"]
        constraints = [models.UniqueConstraint(fields=["pattern"], name="riskrule_pattern_uniq")]

    def __str__(self) -> str:
        return f"{self.pattern} → {self.risk}"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"


class ApprovalRequest(ConcurrentTransitionMixin, models.Model):
    """The approval gate of one risky step: reviewers' go-ahead before it runs.

    ``policy`` is the ``ApprovalPolicy`` (as JSON) it is decided by, copied from its step when
    it opened: ``required_approvals`` approvals from different reviewers approve it (2 for
    critical risk); one rejection rejects it. After ``expires_at`` it can no longer be decided
    and the sweeper expires it, which refuses the step.
    """

    step = models.OneToOneField("runs.Step", on_delete=models.CASCADE, related_name="approval")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="approvals")
    risk = models.CharField(max_length=16, choices=Risk.choices)
    policy = models.JSONField(default=dict)
    status = FSMField(
        max_length=16,
        choices=ApprovalStatus.choices,
        default=ApprovalStatus.PENDING,
        protected=True,
    )
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["status", "created_at"], name="approval_status_idx")]
        permissions = [("decide_approvalrequest", "Can approve or reject approval requests")]

    def __str__(self) -> str:
        return f"approval {self.pk} for step {self.step_id} ({self.status})"

    @property
    def rule(self) -> ApprovalPolicy:
        """The ``ApprovalPolicy`` this request is decided by."""
        return ApprovalPolicy.from_json(self.policy)

    @property
    def required_approvals(self) -> int:
        """How many reviewers must approve (the policy's ``approvals``)."""
        return self.rule.approvals

    @property
    def status_info(self) -> StatusInfo:
        """The status as shown: value, label, tone (``APPROVAL_STATUSES``)."""
        return APPROVAL_STATUSES[self.status]

    @transition(field=status, source=ApprovalStatus.PENDING, target=ApprovalStatus.APPROVED)
    def approve(self, *, now: datetime) -> None:
        """pending → approved: enough reviewers approved."""
        self.decided_at = now

    @transition(field=status, source=ApprovalStatus.PENDING, target=ApprovalStatus.REJECTED)
    def reject(self, *, now: datetime) -> None:
        """pending → rejected: a reviewer rejected."""
        self.decided_at = now

    @transition(field=status, source=ApprovalStatus.PENDING, target=ApprovalStatus.EXPIRED)
    def expire(self, *, now: datetime) -> None:
        """pending → expired: nobody decided before ``expires_at``."""
        self.decided_at = now

    @transition(field=status, source=ApprovalStatus.PENDING, target=ApprovalStatus.CANCELLED)
    def cancel(self, *, now: datetime) -> None:
        """pending → cancelled: the run was cancelled."""
        self.decided_at = now


APPROVAL_STATUSES = status_map(
    [
        StatusInfo("pending", "Pending", "attention", open=True, cancellable=True),
        StatusInfo("approved", "Approved", "success", terminal=True),
        StatusInfo("rejected", "Rejected", "danger", terminal=True),
        StatusInfo("expired", "Expired", "danger", terminal=True),
        StatusInfo("cancelled", "Cancelled", "muted", terminal=True),
    ],
    choices=ApprovalStatus.values,
)


class Decision(models.TextChoices):
    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"


DECISION_PAST_TENSE: dict[str, str] = {Decision.APPROVE: "approved", Decision.REJECT: "rejected"}


class ApprovalDecision(models.Model):
    """One reviewer's approve or reject on an approval request, with their comment.

    A reviewer decides at most once per request (unique constraint), so two approvals always
    come from two people. ``reviewer_name`` is a copy that survives the user's deletion.
    """

    approval = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="decisions"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer_name = models.CharField(max_length=150)
    decision = models.CharField(max_length=8, choices=Decision.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "reviewer"], name="decision_one_per_reviewer"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer_name} {self.past_tense} approval {self.approval_id}"

    @property
    def past_tense(self) -> str:
        """The decision as a verb in the past: ``approved`` or ``rejected``."""
        return DECISION_PAST_TENSE[self.decision]
