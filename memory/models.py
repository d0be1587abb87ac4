"""The memory store: items an agent recalls across runs and sessions, under a namespace path,
with every version kept (issue 33, items 1-3), written through ``memory.services``.

Operations mirror LangGraph's ``BaseStore`` (``langgraph.store.base``: ``put``, ``get``,
``delete``, ``search``, ``list_namespaces``), so its store maps onto them one to one.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from agentops.actors import ActorKind
from agentops.errors import InvalidInput
from memory.namespaces import NAMESPACE_SEPARATOR, namespace_labels

# The start of a memory item's audit chain name (``memory_chain``).
MEMORY_CHAIN_PREFIX = "memory:"


def memory_chain(item_id: object) -> str:
    """The name of the audit chain of memory item ``item_id`` (a UUID or its text): every
    write and deletion of it, with the value before and after."""
    return f"{MEMORY_CHAIN_PREFIX}{item_id}"


def item_etag(item_id: object, version: int) -> str:
    """The strong entity tag (RFC 9110 §8.8.3) of version ``version`` of memory item
    ``item_id``, quotes included: ``"<item id>:<version>"``."""
    return f'"{item_id}:{version}"'


class MemoryItem(models.Model):
    """The current version of one memory item: ``value`` (a JSON object) under ``key`` in the
    namespace ``namespace_path`` (its labels joined by ``.``: ``("project", "user:42",
    "preferences")`` is ``project.user:42.preferences``; ``depth`` counts the labels) of
    ``project``.

    ``text`` is what full-text search reads (the client's, else the value's strings), and
    ``search_vector`` its PostgreSQL ``tsvector`` (``english`` configuration; None on
    SQLite, where search falls back to substring matching); ``tags`` a list of strings.
    ``expires_at`` (None: never) ends the item: reads skip it from that instant, and
    ``memory.tasks.purge_expired_memory`` deletes it; ``ttl_seconds`` (None: no TTL) is the
    time to live a read with ``refresh_ttl`` renews (LangGraph's ``refresh_ttl``).

    Provenance of the latest write: the ``run``, ``step``, ``session`` and ``source_message``
    (the message the item was learnt from; a tool result is its ``step``) it came from,
    each set null when retention or erasure deletes them (history keeps their ids:
    ``MemoryVersion``), and the actor, copied by value. ``subject`` is the end user the item
    is about (blank: none; defaults to the session's): a subject's erasure deletes it.

    ``version`` counts the item's writes (1, 2, ...); its ETag is ``item_etag``. Deleting the
    item deletes this row; its versions stay.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed first in the unique constraint and the namespace index: no index of its own.
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="memory_items", db_index=False
    )
    namespace_path = models.CharField(max_length=1000)
    depth = models.PositiveSmallIntegerField()
    key = models.CharField(max_length=500)
    value = models.JSONField()
    text = models.TextField(blank=True)
    search_vector = SearchVectorField(null=True, blank=True, editable=False)
    tags = models.JSONField(default=list, blank=True)
    version = models.PositiveIntegerField(default=1)
    expires_at = models.DateTimeField(null=True, blank=True)
    ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    subject = models.CharField(max_length=200, blank=True, db_index=True)
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    step = models.ForeignKey(
        "runs.Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    session = models.ForeignKey(
        "runs.AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source_message = models.ForeignKey(
        "runs.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_kind = models.CharField(max_length=16, choices=ActorKind.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    # What a put that replaces the item writes (``memory.rows.ItemRows.update``; the
    # ``search_vector`` follows ``text`` in the same transaction).
    UPDATED_FIELDS = (
        "value",
        "text",
        "tags",
        "version",
        "expires_at",
        "ttl_seconds",
        "subject",
        "run",
        "step",
        "session",
        "source_message",
        "actor_kind",
        "actor_id",
        "actor_name",
        "updated_at",
    )

    class Meta:
        ordering = ["namespace_path", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "namespace_path", "key"], name="memoryitem_namespace_key_uniq"
            )
        ]
        indexes = [
            # Namespace prefix searches (``LIKE 'a.b.%'``) use it in any collation.
            models.Index(
                fields=["project", "namespace_path"],
                name="memoryitem_namespace_idx",
                opclasses=["int8_ops", "text_pattern_ops"],
            ),
            models.Index(
                fields=["expires_at"],
                name="memoryitem_expires_idx",
                condition=models.Q(expires_at__isnull=False),
            ),
            models.Index(fields=["project", "updated_at"], name="memoryitem_updated_idx"),
            GinIndex(fields=["search_vector"], name="memoryitem_search_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace_path} / {self.key}"

    def get_absolute_url(self) -> str:
        """The item's page."""
        return reverse("memory-item", args=[self.pk])

    @property
    def namespace(self) -> tuple[str, ...]:
        """The namespace as a tuple of labels."""
        return tuple(self.namespace_path.split(NAMESPACE_SEPARATOR))

    @property
    def etag(self) -> str:
        return item_etag(self.pk, self.version)


class MemoryOperation(models.TextChoices):
    PUT = "put", "Put"
    DELETE = "delete", "Delete"
    EXPIRE = "expire", "Expired"


class MemoryVersion(models.Model):
    """One write of a memory item, kept for its history: ``operation`` put (``value`` is
    what was written), delete (``value`` is what was deleted, ``reason`` why) or expire (the
    beat's purge deleted it after ``expires_at``). ``item_id`` is the item's id (copied: the
    item may be gone), ``version`` its version after the write (a deletion keeps the last).

    Provenance is copied by value (``run_id``, ``step_id``, ``session_id``,
    ``source_message_id``, the actor): history outlives runs and users. Deleted by retention
    (``MemoryRetentionPolicy``) and by a subject's erasure, never edited.
    """

    item_id = models.UUIDField()
    project = models.ForeignKey(
        "projects.Project",
        on_delete=models.PROTECT,
        related_name="memory_versions",
        db_index=False,
    )
    namespace_path = models.CharField(max_length=1000)
    key = models.CharField(max_length=500)
    version = models.PositiveIntegerField()
    operation = models.CharField(max_length=8, choices=MemoryOperation.choices)
    value = models.JSONField(null=True)
    text = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    subject = models.CharField(max_length=200, blank=True, db_index=True)
    run_id = models.UUIDField(null=True, blank=True)
    step_id = models.BigIntegerField(null=True, blank=True)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    session_id = models.UUIDField(null=True, blank=True)
    source_message_id = models.BigIntegerField(null=True, blank=True)
    actor_kind = models.CharField(max_length=16, choices=ActorKind.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["item_id", "-version", "-id"]
        indexes = [
            models.Index(fields=["item_id", "-id"], name="memoryversion_item_idx"),
            models.Index(fields=["project", "namespace_path", "key"], name="memoryversion_key_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace_path} / {self.key} v{self.version} ({self.operation})"


class MemoryRetentionPolicy(models.Model):
    """An admin-editable rule: delete the memory items of ``project`` (empty: every project)
    under ``namespace_prefix`` (labels joined by ``.``; empty: every namespace) last written
    more than ``max_age_days`` days ago, with their history and audit chains; history of items
    already gone (deleted or expired) goes after the same age. Applied by
    ``memory.retention.memory_retention_purge`` (beat: ``memory.purge``)."""

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memory_retention_policies",
    )
    namespace_prefix = models.CharField(max_length=1000, blank=True)
    max_age_days = models.PositiveIntegerField()

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "memory retention policies"

    def __str__(self) -> str:
        where = self.namespace_prefix or "every namespace"
        return f"{self.name}: {where} after {self.max_age_days} days"

    def clean(self) -> None:
        """Refuse a prefix that is no namespace (empty labels, over the limits)."""
        if self.namespace_prefix:
            try:
                namespace_labels(self.namespace_prefix)
            except InvalidInput as exc:
                raise ValidationError({"namespace_prefix": exc.message}) from None
