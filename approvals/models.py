"""Approval requests for risky steps, reviewers' decisions and the risk policy."""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import Any

import apprise
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from django_fsm import FSMField, transition

from agentops.conditions import ConditionError, check_condition
from agentops.fsm import GuardedTransitions
from agentops.statuses import StatusInfo, status_map
from approvals.policy import EXPIRY_FAILS, EXPIRY_REJECTS, ApprovalPolicy
from runs.models import Risk
from runs.tools.validators import Validator, validators_from_json

# Webhook URLs one rule or group may notify.
MAX_WEBHOOKS = 10


def webhook_list(text: str) -> list[str]:
    """The webhook URLs of a ``webhook_urls`` field: one apprise URL a line, blanks dropped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def validate_webhook_urls(text: str) -> None:
    """Refuse ``webhook_urls`` that apprise cannot use (one URL a line, e.g.
    ``json://hooks.example.com/approvals``, ``slack://...``).

    Raises:
        ValidationError: a line is not a URL of an apprise service, or more than
            ``MAX_WEBHOOKS`` lines.
    """
    urls = webhook_list(text)
    if len(urls) > MAX_WEBHOOKS:
        raise ValidationError(f"at most {MAX_WEBHOOKS} webhook URLs")
    for number, url in enumerate(urls, 1):
        if apprise.Apprise.instantiate(url) is None:
            raise ValidationError(
                f"line {number} is not a webhook URL apprise knows (e.g. json://host/path, "
                "jsons://host/path)"
            )


def validate_condition(text: str) -> None:
    """The form and model validator of ``RiskRule.condition`` (``agentops.conditions``).

    Raises:
        ValidationError: the condition may not be saved; the message says why.
    """
    if not text.strip():
        return
    try:
        check_condition(text)
    except ConditionError as exc:
        raise ValidationError(f"invalid condition: {exc}") from None


def validate_validators(value: Any) -> None:
    """The model validator of ``RiskRule.validators`` (``validators_from_json``).

    Raises:
        ValidationError: the declaration is malformed; the message names the item and why.
    """
    try:
        validators_from_json(value, default_rule="rule")
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


class ExpiryOutcome(models.TextChoices):
    REJECT = EXPIRY_REJECTS, "Reject to the agent (approval_expired; an agent may replan)"
    FAIL = EXPIRY_FAILS, "Fail the run"


class RiskRule(models.Model):
    """An admin-editable rule classifying tool calls by tool name and, optionally, arguments,
    and the approval policy of the calls it classifies.

    ``pattern`` is a shell-style pattern (``fnmatch``: ``book_*``, ``calculate``) matched against
    the tool name, and ``condition`` (optional) an expression over the call's arguments
    (``amount > 500``; grammar in ``agentops.conditions``). The enabled rule with the lowest
    ``priority`` whose pattern and condition match wins over the tool's declared risk; a rule
    not ``applies_to_read_only`` is skipped for a tool that declares itself read-only.
    ``required_approvals`` overrides the default count (1 for high, 2 for critical) when set.

    The policy of a call it classifies (``approvals.policy.ApprovalPolicy``): ``approvers``
    (only members of this group, who must also be reviewers of the run's project, decide;
    empty: any reviewer), ``ttl_seconds`` (empty: ``AGENTOPS_APPROVAL_TTL_SECONDS``),
    ``remind_after_seconds``, ``escalate_after_seconds`` with ``escalation_group``, and
    ``on_expiry``. ``webhook_urls`` (apprise URLs, one a line) are notified of its requests
    besides the approvers' e-mail.

    ``risk`` ``deny`` refuses the calls it matches before any gate (``not_granted``).
    ``validators`` (JSON, ``runs.tools.validators.validators_from_json``; a validator without
    a ``rule`` is named after the rule) check the results of the calls it matches, after the
    tool's own (``approvals.risk.ApprovalStepPolicy.validators``).
    ``project`` is the project whose policy the rule belongs to (``runs.policy``): it applies
    to that project's calls only and is tried before every global rule (``project`` empty: a
    global default, for every project), so a project extends the defaults or overrides them.
    Its changes go through ``approvals.rules`` (audited in the project's chain).
    """

    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="risk_rules",
        help_text="The project whose policy it belongs to; empty: a global default.",
    )
    pattern = models.CharField(max_length=128)
    condition = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_condition],
        help_text="Optional expression over the call's arguments, e.g. amount > 500, "
        'payment.amount > 500, args["payment"]["amount"] > 500 and currency == "USD". '
        "When it cannot be evaluated (a missing key, a wrong type) the rule does not match "
        "and the call waits for at least one approval.",
    )
    risk = models.CharField(max_length=16, choices=Risk.choices)
    required_approvals = models.PositiveSmallIntegerField(null=True, blank=True)
    priority = models.PositiveIntegerField(default=100, help_text="Lower wins.")
    enabled = models.BooleanField(default=True)
    applies_to_read_only = models.BooleanField(
        default=True,
        help_text="Also classify calls of tools that declare themselves read-only (an "
        "MCP server's readOnlyHint, or a registered tool without side effects). Untick "
        "it where you trust those hints: the tools are then low risk unless another "
        "rule says otherwise.",
    )
    description = models.CharField(
        max_length=200, blank=True, help_text="A name for the rule, shown to reviewers."
    )
    approvers = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Only members of this group (who are also reviewers of the run's project) "
        "may decide; empty: any reviewer of the project.",
    )
    ttl_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds an undecided request stays open; empty: AGENTOPS_APPROVAL_TTL_SECONDS.",
    )
    remind_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Remind the approvers this many seconds after opening."
    )
    escalate_after_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="This many seconds after opening, the escalation group may decide too and "
        "is notified.",
    )
    escalation_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    on_expiry = models.CharField(
        max_length=8, choices=ExpiryOutcome.choices, default=ExpiryOutcome.REJECT
    )
    webhook_urls = models.TextField(
        blank=True,
        validators=[validate_webhook_urls],
        help_text="apprise URLs notified of this rule's requests, one a line "
        "(e.g. json://hooks.example.com/approvals).",
    )
    validators = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_validators],
        help_text='Checks of the results of the calls it matches, e.g. [{"schema": {"type": '
        '"object", "required": ["id"]}}, {"condition": "total <= 500", "on_failure": "gate"}] '
        "(each: one of schema, check, condition; optional rule, on_failure fail or gate, retry).",
    )

    class Meta:
        ordering = ["priority", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "pattern", "condition"],
                name="riskrule_pattern_condition_uniq",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        when = f" if {self.condition}" if self.condition else ""
        return f"{self.pattern}{when} → {self.risk}"

    @property
    def name(self) -> str:
        """How reviewers see the rule: its description, else its pattern."""
        return self.description or self.pattern

    @cached_property
    def result_validators(self) -> tuple[Validator, ...]:
        """Its ``validators`` as ``Validator`` objects (read once per instance: the rules a
        process keeps, ``approvals.risk.load_rules``, parse them once)."""
        return validators_from_json(self.validators, default_rule=self.name)

    def clean(self) -> None:
        """Refuse a policy that cannot work: reminders or escalation at or after expiry, an
        escalation without its group or a group without its delay, or to the approvers
        themselves.

        Raises:
            ValidationError: by field.
        """
        ttl = self.ttl_seconds or settings.AGENTOPS_APPROVAL_TTL_SECONDS
        errors: dict[str, str] = {}
        if self.ttl_seconds == 0:
            errors["ttl_seconds"] = "must be at least 1 second (empty: the default)"
        for name in ("remind_after_seconds", "escalate_after_seconds"):
            value = getattr(self, name)
            if value is not None and not 0 < value < ttl:
                errors[name] = f"must be between 1 and {ttl - 1} seconds (before expiry)"
        if self.escalate_after_seconds and not self.escalation_group_id:
            errors["escalation_group"] = "choose the group the request escalates to"
        if self.escalation_group_id and not self.escalate_after_seconds:
            errors["escalate_after_seconds"] = "say after how many seconds it escalates"
        if (
            self.escalation_group_id
            and self.escalation_group_id == self.approvers_id
            and "escalation_group" not in errors
        ):
            errors["escalation_group"] = "must differ from the approvers"
        if errors:
            raise ValidationError(errors)


class GroupWebhooks(models.Model):
    """The webhooks of a group of approvers: notified, besides its members' e-mail, of the
    requests it may decide (when it is a rule's approvers or escalation group)."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="webhooks")
    webhook_urls = models.TextField(
        validators=[validate_webhook_urls],
        help_text="apprise URLs, one a line (e.g. json://hooks.example.com/finance).",
    )

    class Meta:
        verbose_name = "group webhooks"
        verbose_name_plural = "group webhooks"

    def __str__(self) -> str:
        return f"webhooks of {self.group}"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"


class ApprovalRequest(GuardedTransitions, models.Model):
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
    # When beat reminds the approvers and escalates (from the policy when it opened; None:
    # never), and when it did (None: not yet). Set once, by a conditional update.
    remind_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["status", "created_at"], name="approval_status_idx"),
            models.Index(
                fields=["remind_at"],
                condition=models.Q(status="pending", reminded_at__isnull=True),
                name="approval_remind_due_idx",
            ),
            models.Index(
                fields=["escalate_at"],
                condition=models.Q(status="pending", escalated_at__isnull=True),
                name="approval_escalate_due_idx",
            ),
        ]
        permissions = [("decide_approvalrequest", "Can approve or reject approval requests")]

    def __str__(self) -> str:
        return f"approval {self.pk} for step {self.step_id} ({self.status})"

    def get_absolute_url(self) -> str:
        """The request's own page (``/approvals/<id>/``)."""
        return reverse("approval-detail", args=[self.pk])

    @property
    def rule(self) -> ApprovalPolicy:
        """The ``ApprovalPolicy`` this request is decided by."""
        return ApprovalPolicy.from_json(self.policy)

    @property
    def escalated(self) -> bool:
        """Whether the request has escalated to its policy's escalation group."""
        return self.escalated_at is not None

    @property
    def required_approvals(self) -> int:
        """How many reviewers must approve (the policy's ``approvals``)."""
        return self.rule.approvals

    @property
    def status_info(self) -> StatusInfo:
        """The status as shown: value, label, tone (``APPROVAL_STATUSES``)."""
        return APPROVAL_STATUSES[self.status]

    def restart(self, *, risk: str, policy: ApprovalPolicy, now: datetime) -> None:
        """Start this pending request over under ``policy`` at ``now`` (its call's arguments
        were edited into a stricter one: ``approvals.reclassify``): its ``risk`` and policy
        replaced, its expiry, reminder and escalation counted again from ``now``, neither
        reminded nor escalated. Not a transition: it stays pending.

        Raises:
            ValueError: the request is not pending.
        """
        if self.status != ApprovalStatus.PENDING:
            raise ValueError(f"approval request {self.pk} is {self.status}, not pending")
        self.risk, self.policy = risk, policy.as_json()
        for field, value in policy.schedule(now).items():
            setattr(self, field, value)
        self.reminded_at = self.escalated_at = None

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
    """A reviewer's decision. ``respond`` refuses the call as ``reject`` does, its comment an
    answer handed to the agent as the call's outcome (LangGraph Agent Inbox's "respond")."""

    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"
    RESPOND = "respond", "Respond"


DECISION_PAST_TENSE: dict[str, str] = {
    Decision.APPROVE: "approved",
    Decision.REJECT: "rejected",
    Decision.RESPOND: "responded",
}


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
        """The decision as a verb in the past: ``approved``, ``rejected`` or ``responded``."""
        return DECISION_PAST_TENSE[self.decision]


class NotificationEvent(models.TextChoices):
    OPENED = "opened", "Request opened"
    REMINDER = "reminder", "Reminder"
    ESCALATED = "escalated", "Escalated"
    EXPIRED = "expired", "Expired"


class NotificationChannel(models.TextChoices):
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Notification(models.Model):
    """One message about an approval request to one target: an e-mail to a person
    (``recipient``, ``target`` their address) or a post to a webhook (``target`` its apprise
    URL).

    Created in the transaction that opens, reminds, escalates or expires the request, at most
    once per request, event, channel and target (unique constraint); sent after commit by a
    task that claims it (``pending`` → ``sending``, a conditional update), so a second task
    sends nothing. A failed attempt goes back to ``pending`` with ``next_attempt_at`` (backoff)
    and ``last_error``, until ``AGENTOPS_NOTIFY_MAX_ATTEMPTS`` attempts made it ``failed``.
    A claim whose worker died is taken back after ``AGENTOPS_NOTIFY_CLAIM_SECONDS`` (the
    message may then arrive twice: at least once, not exactly once, across a crash).
    """

    approval = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.CharField(max_length=16, choices=NotificationEvent.choices)
    channel = models.CharField(max_length=8, choices=NotificationChannel.choices)
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    recipient_name = models.CharField(max_length=150, blank=True)
    target = models.TextField()
    subject = models.CharField(max_length=250)
    body = models.TextField()
    status = models.CharField(
        max_length=8, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "event", "channel", "target"],
                name="notification_once_per_target",
            )
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status="pending"),
                name="notification_due_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.channel} to {self.recipient_name or 'webhook'} ({self.status})"


class ApprovalMark(models.Model):
    """One reviewer's own marks on an approval request: ``snoozed_until`` (hidden from their
    inbox until then; None: not snoozed) and ``assigned_at`` (they took it on: "assign to
    me"; None: not assigned). Other reviewers' inboxes are unchanged. Changed only by
    ``approvals.marks``, each change audited (``approval.snoozed``, ``approval.assigned``,
    ...)."""

    approval = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="marks")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approval_marks"
    )
    snoozed_until = models.DateTimeField(null=True, blank=True)
    assigned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["approval", "user"], name="approval_mark_uniq")
        ]

    def __str__(self) -> str:
        return f"marks of user {self.user_id} on approval {self.approval_id}"
