"""The API's shapes of artifacts: what an artifact looks like, the query of an upload, the
filters of the list."""

from __future__ import annotations

from typing import Any

from django import forms
from django.urls import reverse
from django_filters import rest_framework as filters
from rest_framework import serializers

from agentops.api import StrictFilterSet, StrictSerializer
from artifacts.models import Artifact


class ArtifactSerializer(serializers.ModelSerializer[Artifact]):
    """An artifact: its ids, links, file name, types (``declared_type`` as uploaded,
    ``content_type`` as sniffed), ``size`` (bytes), ``sha256`` (hex), who uploaded it, and
    ``href``, the path its content is downloaded from (through agentops, never a bucket)."""

    content_type = serializers.CharField(source="sniffed_type")
    actor = serializers.SerializerMethodField()
    href = serializers.SerializerMethodField()

    class Meta:
        model = Artifact
        fields = [
            "id",
            "run",
            "step",
            "session",
            "kind",
            "name",
            "declared_type",
            "content_type",
            "size",
            "sha256",
            "actor",
            "created_at",
            "href",
        ]
        read_only_fields = fields

    def get_actor(self, artifact: Artifact) -> dict[str, str]:
        """``{"kind", "id", "name"}`` of who uploaded it."""
        return {"kind": artifact.actor_kind, "id": artifact.actor_id, "name": artifact.actor_name}

    def get_href(self, artifact: Artifact) -> str:
        """The path of its content (``GET``; ``?download=1`` offers it as a file)."""
        return reverse("api-artifact-content", args=[artifact.pk])


class UploadQuerySerializer(StrictSerializer):
    """The query of an upload: the ``run`` (id) it belongs to, optionally its ``step`` (id,
    in that run), and the file's ``name``. The body is the file itself, its Content-Type the
    declared type."""

    run = serializers.UUIDField()
    step = serializers.IntegerField(required=False, min_value=1)
    name = serializers.CharField(max_length=1000)


class DeleteQuerySerializer(StrictSerializer):
    """The query of a deletion: an optional ``reason`` (kept in the audit event)."""

    reason = serializers.CharField(max_length=1000, required=False, default="", allow_blank=True)


class ContentQuerySerializer(StrictSerializer):
    """The query of a download: ``download=1`` offers the file as an attachment whatever its
    type."""

    download = serializers.BooleanField(required=False, default=False)


class IntegerFilter(filters.Filter):
    """A filter on a whole number (``NumberFilter`` takes decimals)."""

    field_class = forms.IntegerField


class ArtifactFilter(StrictFilterSet):
    """Filters of the artifacts list: ``run`` (id), ``step`` (id), ``kind`` (``upload`` |
    ``result``)."""

    run = filters.UUIDFilter(field_name="run_id")
    step = IntegerFilter(field_name="step_id")
    kind = filters.ChoiceFilter(choices=Artifact.Kind.choices)

    class Meta:
        model = Artifact
        fields: list[Any] = []
