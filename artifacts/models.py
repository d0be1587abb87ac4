"""Artifacts: files an agent or a tool produced during a run, kept in the ``artifacts``
storage (``settings.STORAGES``) and described here."""

from __future__ import annotations

import uuid

from django.db import models

from artifacts.media import preview_kind


class Artifact(models.Model):
    """One stored file of a run (and of its step, its session, when it has them).

    ``name`` is the client's file name (shown and offered on download, never used in the
    storage path); ``declared_type`` the media type the uploader declared (Content-Type);
    ``sniffed_type`` the one libmagic reads from the file's first bytes, which alone decides
    how it is served (``artifacts.serving``). ``size`` is in bytes, ``sha256`` the hex
    SHA-256 of the content as received (``manage.py verify_artifacts`` checks the stored file
    against both). ``storage_name`` is the file's name in the ``artifacts`` storage:
    ``<project id>/<run id>/<artifact id>``, nothing the client chose. ``kind`` says whether
    it was uploaded or is a step result too large to keep in the step (``RESULT``: the step
    holds ``{"$artifact": id, ...}`` instead, ``artifacts.services.offload_large_result``).

    The run, step and session are foreign keys by name (the runs app sits above this one);
    retention deletes a run's artifacts, and their files after the commit
    (``artifacts.retention``). The uploader's actor kind, id and name are copied (no foreign
    key: history outlives users). ``idempotency_key`` is the upload's ``Idempotency-Key``
    header (blank: none), unique per uploader and project, kept as long as the artifact.
    """

    class Kind(models.TextChoices):
        UPLOAD = "upload", "Upload"
        RESULT = "result", "Step result"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="artifacts"
    )
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="artifacts")
    step = models.ForeignKey(
        "runs.Step", on_delete=models.CASCADE, null=True, blank=True, related_name="artifacts"
    )
    session = models.ForeignKey(
        "runs.AgentSession",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="artifacts",
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.UPLOAD)
    name = models.CharField(max_length=255)
    declared_type = models.CharField(max_length=255)
    sniffed_type = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_name = models.CharField(max_length=255, unique=True)
    actor_kind = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=255, blank=True)
    actor_name = models.CharField(max_length=255, blank=True)
    idempotency_key = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One artifact per Idempotency-Key of an uploader in a project: a retried upload
            # finds the first one (``artifacts.services.artifact_upload_once``).
            models.UniqueConstraint(
                fields=["project", "actor_kind", "actor_id", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="artifact_idempotency_key_uniq",
            )
        ]
        indexes = [
            models.Index(fields=["run", "created_at"], name="artifact_run_created"),
            models.Index(fields=["step", "sha256"], name="artifact_step_sha256"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def preview(self) -> str:
        """How a run page previews it (``artifacts.media.preview_kind``)."""
        return preview_kind(self.sniffed_type)


class ArtifactLimit(models.Model):
    """The largest artifact ``project`` accepts (``max_bytes``, bytes), replacing
    ``settings.AGENTOPS_ARTIFACT_MAX_BYTES`` there; an upload past it is refused with 413."""

    project = models.OneToOneField(
        "projects.Project", on_delete=models.CASCADE, related_name="artifact_limit"
    )
    max_bytes = models.PositiveBigIntegerField()

    def __str__(self) -> str:
        return f"{self.project}: {self.max_bytes} bytes"
