"""Retention: the policies that delete or redact finished runs after their time, and the
record of each purge (``runs.retention``, ``runs.purges``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.models.choices import AgentKind
from runs.statuses import RUN_TERMINAL, RunStatus


class RetentionAction(models.TextChoices):
    DELETE = "delete", "Delete the run and everything it holds"
    REDACT = "redact", "Keep the run, blank its data"


def _terminal_statuses() -> list[str]:
    return [
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.COMPENSATED,
        RunStatus.COMPENSATION_FAILED,
    ]


class RetentionPolicy(models.Model):
    """An admin-editable rule: what to do with finished runs older than ``ttl_days`` (days).

    A run qualifies when its status is one of ``statuses`` (terminal statuses only), its
    ``agent`` matches (blank: any) and it finished more than ``ttl_days`` days ago. ``delete``
    removes the run with its steps, attempts, checkpoints, agent state versions, ledger rows
    and approvals; ``redact`` keeps the rows but blanks their data (arguments, results, errors,
    conversation, state; checkpoints and agent state versions are deleted).
    Audit events are kept either way (they have their own, longer TTL:
    ``AGENTOPS_AUDIT_RETENTION_DAYS``). Applied by ``runs.retention.retention_purge``.

    ``project`` is the project whose policy it belongs to: it applies to that project's runs
    only. A global policy (no project) applies to the runs of every project that has no
    enabled policy of its own: a project's own policies override the defaults. Changes of a
    project's policy are audited in its chain (``runs.policy``).
    """

    name = models.CharField(max_length=100, unique=True)
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retention_policies",
        help_text="Applies to this project's runs only; empty: to every project without "
        "an enabled policy of its own.",
    )
    enabled = models.BooleanField(default=True)
    statuses = models.JSONField(default=_terminal_statuses)
    agent = models.CharField(max_length=16, choices=AgentKind.choices, blank=True)
    ttl_days = models.PositiveIntegerField()
    action = models.CharField(
        max_length=8, choices=RetentionAction.choices, default=RetentionAction.DELETE
    )

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"{self.name}: {self.action} after {self.ttl_days} days"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if not isinstance(self.statuses, list) or not self.statuses:
            raise ValidationError({"statuses": "a non-empty list of run statuses"})
        bad = [s for s in self.statuses if s not in RUN_TERMINAL]
        if bad:
            raise ValidationError({"statuses": f"only terminal statuses may expire, not {bad}"})


class PurgeStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


# A purge that is queued or running: at most one at a time (``retention_purge_open_uniq``).
PURGE_OPEN = (PurgeStatus.QUEUED, PurgeStatus.RUNNING)


class RetentionPurge(models.Model):
    """One application of the retention policies, started from admin ("Run now", one policy)
    or by Celery beat (every enabled policy, then the audit chains), with its progress.

    ``policy`` is the policy applied (None: every enabled policy, or a policy since deleted:
    ``policy_name`` keeps its name, empty for every policy). ``started_by_name`` is the actor
    who started it, copied (``started_by`` the user, when a person did). ``status`` moves
    ``queued → running → succeeded | failed`` by conditional updates (``runs.purges``); while
    it runs, the counts (runs and steps deleted, runs redacted, audit events deleted,
    transactions) grow after each transaction. ``error`` says why it failed. At most one purge
    is open (queued or running) at a time: a database constraint refuses a second.
    """

    policy = models.ForeignKey(
        RetentionPolicy,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="purges",
    )
    policy_name = models.CharField(max_length=100, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    started_by_name = models.CharField("started by", max_length=150)
    status = models.CharField(
        max_length=16, choices=PurgeStatus.choices, default=PurgeStatus.QUEUED
    )
    runs = models.PositiveIntegerField("runs deleted", default=0)
    steps = models.PositiveIntegerField("steps deleted", default=0)
    redacted_runs = models.PositiveIntegerField("runs redacted", default=0)
    audit_events = models.PositiveIntegerField("audit events deleted", default=0)
    batches = models.PositiveIntegerField("transactions", default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                models.Value(True),
                condition=models.Q(status__in=PURGE_OPEN),
                name="retention_purge_open_uniq",
                violation_error_message="Another retention purge is queued or running.",
            ),
        ]

    def __str__(self) -> str:
        return f"purge {self.pk} of {self.policy_name or 'every policy'} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in PURGE_OPEN

    @property
    def duration_ms(self) -> int | None:
        """How long it ran (ms); None until it finished."""
        if self.started_at and self.finished_at:
            return int((self.finished_at - self.started_at).total_seconds() * 1000)
        return None
