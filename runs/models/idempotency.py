"""The API's ``Idempotency-Key``s and the responses they got (``runs.idempotency``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotencyKeyStatus(models.TextChoices):
    IN_FLIGHT = "in_flight", "In flight"
    DONE = "done", "Done"


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` on a POST, with the response it got (``runs.idempotency``).

    Keyed by (user, project, key): ``project`` is the project of the API token the request
    came with, none for a session's (a browser's) request; the same key sent with a token of
    another project is another key. ``fingerprint`` is the SHA-256 of the method, path and
    canonical JSON body, so the same key with a different request is told apart.
    ``response_status`` and ``response_body`` replay the first response; the row may be purged
    after ``expires_at``. ``locked_at`` is when the request holding an in-flight key started
    (a crashed request's key is taken over after ``AGENTOPS_IDEMPOTENCY_LOCK_SECONDS``).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=IdempotencyKeyStatus.choices)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    locked_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        # Two constraints: NULLs are distinct in a unique index (``NULLS NOT DISTINCT`` needs
        # PostgreSQL 15).
        constraints = [
            models.UniqueConstraint(
                fields=["user", "project", "key"],
                condition=models.Q(project__isnull=False),
                name="idempotency_token_key_uniq",
            ),
            models.UniqueConstraint(
                fields=["user", "key"],
                condition=models.Q(project__isnull=True),
                name="idempotency_session_key_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"
