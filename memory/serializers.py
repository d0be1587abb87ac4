"""JSON shapes of memory items and the memory API's input serializers.

Input serializers check shapes only; ``memory.services`` and ``memory.selectors`` check what
the values mean (namespace labels, sizes, TTLs), with one message per problem.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from memory.models import MemoryItem, MemoryVersion
from memory.selectors import MAX_LIMIT, MAX_OFFSET


def _labels(**options: Any) -> serializers.ListField:
    """A namespace's labels (checked by ``memory.namespaces.namespace_labels``)."""
    child = serializers.CharField(allow_blank=True, trim_whitespace=False)
    return serializers.ListField(child=child, **options)


class ActorSerializer(serializers.Serializer[Any]):
    """Who wrote it: ``kind`` (user, api_client, worker, system), ``id`` and ``name``."""

    kind = serializers.CharField(source="actor_kind")
    id = serializers.CharField(source="actor_id")
    name = serializers.CharField(source="actor_name")


class MemoryItemSerializer(FieldsBuiltOnce, serializers.ModelSerializer[MemoryItem]):
    """A memory item (LangGraph's ``Item``): ``namespace`` (labels), ``key``, ``value``, the
    ``text`` search reads, ``tags``, ``version`` and ``etag`` (send it as ``If-Match``),
    ``expires_at`` and ``ttl_seconds`` (null: none), ``subject``, provenance (``run``,
    ``step``, ``session``, ``source_message``: ids, null when none or deleted since) and who
    wrote it (``actor``), ``created_at`` and ``updated_at``."""

    project = serializers.CharField(source="project.slug", read_only=True)
    namespace = serializers.ListField(child=serializers.CharField(), read_only=True)
    etag = serializers.CharField(read_only=True)
    run = serializers.UUIDField(source="run_id", read_only=True, allow_null=True)
    step = serializers.IntegerField(source="step_id", read_only=True, allow_null=True)
    session = serializers.UUIDField(source="session_id", read_only=True, allow_null=True)
    source_message = serializers.IntegerField(
        source="source_message_id", read_only=True, allow_null=True
    )
    actor = serializers.SerializerMethodField()

    class Meta:
        model = MemoryItem
        fields = [
            "id",
            "project",
            "namespace",
            "key",
            "value",
            "text",
            "tags",
            "version",
            "etag",
            "expires_at",
            "ttl_seconds",
            "subject",
            "run",
            "step",
            "session",
            "source_message",
            "actor",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ActorSerializer)
    def get_actor(self, item: MemoryItem) -> dict[str, Any]:
        return dict(ActorSerializer(item).data)


class SearchHitSerializer(serializers.Serializer[Any]):
    """A search hit (LangGraph's ``SearchItem``): the item's fields and its ``score`` (the
    full-text rank; null without a query)."""

    item = MemoryItemSerializer()
    score = serializers.FloatField(allow_null=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = dict(MemoryItemSerializer(instance.item).data)
        data["score"] = instance.score
        return data


class SearchResultSerializer(serializers.Serializer[Any]):
    """A page of search hits, best first; ``next_offset`` is where the next page starts
    (null: this is the last)."""

    items = SearchHitSerializer(many=True)
    next_offset = serializers.IntegerField(allow_null=True)


class MemoryVersionSerializer(FieldsBuiltOnce, serializers.ModelSerializer[MemoryVersion]):
    """One kept version of an item: ``operation`` (put, delete, expire), ``version``, the
    ``value`` written (or deleted), ``reason`` (a deletion's), provenance ids (copied:
    they outlive runs) and the actor."""

    actor = serializers.SerializerMethodField()

    class Meta:
        model = MemoryVersion
        fields = [
            "id",
            "item_id",
            "version",
            "operation",
            "value",
            "text",
            "tags",
            "expires_at",
            "reason",
            "run_id",
            "step_id",
            "step_index",
            "session_id",
            "source_message_id",
            "actor",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ActorSerializer)
    def get_actor(self, version: MemoryVersion) -> dict[str, Any]:
        return dict(ActorSerializer(version).data)


class ProjectField(StrictSerializer):
    """``project``: the project's slug (default: the token's project, or the only one)."""

    project = serializers.SlugField(required=False)


class PutItemSerializer(ProjectField):
    """``PUT /api/v1/memory/items/``: ``namespace`` (labels), ``key``, ``value`` (a JSON
    object); optional ``text`` for search (default: the value's strings), ``tags``,
    ``ttl_seconds`` or ``expires_at``, ``subject`` (default: the session's), and provenance:
    ``run`` (id), ``step_index`` (of that run), ``session`` (id; default: the run's),
    ``source_message`` (a message id of that run or session)."""

    namespace = _labels()
    key = serializers.CharField(trim_whitespace=False)
    value = serializers.JSONField()
    text = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    ttl_seconds = serializers.IntegerField(required=False)
    expires_at = serializers.DateTimeField(required=False)
    subject = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    run = serializers.UUIDField(required=False)
    step_index = serializers.IntegerField(required=False, min_value=0)
    session = serializers.UUIDField(required=False)
    source_message = serializers.IntegerField(required=False, min_value=1)


class ItemQuerySerializer(ProjectField):
    """The query of ``GET`` and ``DELETE /api/v1/memory/items/``: ``namespace`` (labels
    joined by ``.``), ``key``; ``refresh_ttl`` (GET: renew the item's TTL), ``reason``
    (DELETE: kept in its history)."""

    namespace = serializers.CharField(trim_whitespace=False)
    key = serializers.CharField(trim_whitespace=False)
    refresh_ttl = serializers.BooleanField(required=False, default=False)
    reason = serializers.CharField(required=False, default="", allow_blank=True)


class SearchSerializer(ProjectField):
    """``POST /api/v1/memory/search/`` (LangGraph's ``search``): ``namespace_prefix``
    (labels; empty: all), ``query`` (full-text), ``filter`` (value fields: ``{"field":
    value}`` or ``{"field": {"$gt": 5}}``; $eq $ne $gt $gte $lt $lte), ``limit`` (1-100),
    ``offset`` (0-10,000), ``refresh_ttl`` (renew the TTL of the items returned)."""

    namespace_prefix = _labels(required=False, default=list)
    query = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    filter = serializers.JSONField(required=False)
    limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=MAX_LIMIT)
    offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=MAX_OFFSET)
    refresh_ttl = serializers.BooleanField(required=False, default=False)


class NamespacesSerializer(ProjectField):
    """``POST /api/v1/memory/namespaces/`` (LangGraph's ``list_namespaces``): ``prefix`` and
    ``suffix`` (labels; ``*`` matches any one), ``max_depth`` (1 or more), ``limit`` (1-100),
    ``offset``."""

    prefix = _labels(required=False, default=list)
    suffix = _labels(required=False, default=list)
    max_depth = serializers.IntegerField(required=False, min_value=1)
    limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=MAX_LIMIT)
    offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=MAX_OFFSET)


class NamespaceListSerializer(serializers.Serializer[Any]):
    """The namespaces found, each a list of labels, sorted."""

    namespaces = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))
