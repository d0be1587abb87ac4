"""Sessions: a user's conversation with an agent over many runs (issue 31, part 3), written
through ``runs.control.sessions``."""

from __future__ import annotations

import uuid

from django.db import models
from django.urls import reverse


class SessionStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


class AgentSession(models.Model):
    """One user's conversation with an agent, over any number of runs (``Run.session``).

    Named ``AgentSession`` so it is never taken for ``django.contrib.sessions``' sessions.
    ``external_id`` is the client's own name for it (1-200 characters, unique per project);
    ``subject`` the end user's subject id (blank: none), which the subject's erasure
    (``runs.control.sessions.subject_erase``) finds it by; ``metadata`` the client's JSON
    object, kept as is. ``status`` is open until closed (``closed_at``); a closed session
    takes no more runs, messages or state. The creator's actor kind, id and name are copied
    (no foreign key: history outlives users).

    Its conversation is the ``Message`` rows naming it (``Message.session``), at session
    positions 0 to ``message_count - 1`` without gaps: those its runs appended (in the order
    they were appended) and those added to the session directly; ``context_tokens`` (tokens)
    is the size of its active context (messages neither removed nor compacted, and the
    summaries of its compactions). Its agent state (the user's preferences and facts, which
    outlive a run) is versioned like a run's (``StateVersion.session``). ``grant`` is the
    tool grant every call of its runs must keep to (``agentops.grants``; None: no limit),
    fixed when it is created.
    """

    # The fields that change after the row is inserted (``save(update_fields=...)``).
    UPDATED_FIELDS = ("status", "closed_at", "message_count", "context_tokens", "updated_at")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="agent_sessions"
    )
    external_id = models.CharField(max_length=200)
    subject = models.CharField(max_length=200, blank=True, db_index=True)
    metadata = models.JSONField(default=dict, blank=True)
    grant = models.JSONField(null=True, blank=True)
    status = models.CharField(
        max_length=8, choices=SessionStatus.choices, default=SessionStatus.OPEN
    )
    message_count = models.PositiveIntegerField(default=0)
    context_tokens = models.PositiveBigIntegerField(default=0)
    creator_kind = models.CharField(max_length=16)
    creator_id = models.CharField(max_length=255, blank=True)
    creator_name = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="agentsession_project_external_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"session {self.external_id} ({self.status})"

    def get_absolute_url(self) -> str:
        """The session's page."""
        return reverse("session-detail", args=[self.pk])

    @property
    def is_open(self) -> bool:
        return self.status == SessionStatus.OPEN
