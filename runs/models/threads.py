"""LangGraph threads (issue 34, item 1): the checkpoints a LangGraph graph saves through the
SDK's ``AgentOpsSaver``, written through ``runs.control.threads``.

A LangGraph thread is an agentops session (``AgentSession``, the thread id its
``external_id``). Its checkpoints are records of their own, not the session's state versions:
a LangGraph checkpoint is named by the client (a UUIDv6 ``checkpoint_id``), lives in a
namespace (``checkpoint_ns``: a subgraph's), has a parent that makes a tree (time travel
forks it), carries channel values that only LangGraph's serializer reads (bytes) stored once
per channel version, and pending writes keyed by task id and index. docs/architecture.md
("LangGraph threads") says more.

Values the server never reads (a checkpoint, a channel's value, a pending write's value) are
kept as LangGraph's serializer made them: its type name (``msgpack``, ``json``, ``bytes``,
``null``, ``empty``...) and its bytes.
"""

from __future__ import annotations

from django.db import models

# The longest thread id, namespace, checkpoint id, channel and version (characters).
MAX_NAME_CHARS = 255


class ThreadCheckpoint(models.Model):
    """One LangGraph checkpoint of a thread (``session``) in namespace ``checkpoint_ns``
    (blank: the root graph's), named ``checkpoint_id`` by LangGraph (a UUIDv6: its text
    sorts as its time), saved after ``parent_checkpoint_id`` (blank: none) of the same
    namespace.

    ``checkpoint_type`` and ``checkpoint_data`` are LangGraph's serializer's type name and
    bytes of the checkpoint without its channel values; ``channel_versions`` (channel →
    version text) names the ``ThreadBlob`` rows holding those values. ``metadata`` is
    LangGraph's checkpoint metadata (``source``, ``step``, ``parents``, ``run_id`` and what
    the caller added), JSON, which ``list`` filters by containment.
    """

    session = models.ForeignKey(
        "runs.AgentSession",
        on_delete=models.CASCADE,
        related_name="thread_checkpoints",
        db_index=False,
    )
    checkpoint_ns = models.CharField(max_length=MAX_NAME_CHARS, blank=True)
    checkpoint_id = models.CharField(max_length=MAX_NAME_CHARS)
    parent_checkpoint_id = models.CharField(max_length=MAX_NAME_CHARS, blank=True)
    checkpoint_type = models.CharField(max_length=32)
    checkpoint_data = models.BinaryField()
    channel_versions = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "checkpoint_ns", "-checkpoint_id"]
        constraints = [
            # Also the index of a thread's newest checkpoints (its first columns).
            models.UniqueConstraint(
                fields=["session", "checkpoint_ns", "checkpoint_id"],
                name="threadcheckpoint_uniq",
            )
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.checkpoint_id} of session {self.session_id}"


class ThreadBlob(models.Model):
    """The value of ``channel`` at ``version`` in a thread's namespace, as LangGraph's
    serializer made it (``type``, ``data``): written once by the checkpoint that changed it,
    read by every later checkpoint whose ``channel_versions`` still name that version."""

    session = models.ForeignKey(
        "runs.AgentSession", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    checkpoint_ns = models.CharField(max_length=MAX_NAME_CHARS, blank=True)
    channel = models.CharField(max_length=MAX_NAME_CHARS)
    version = models.CharField(max_length=MAX_NAME_CHARS)
    type = models.CharField(max_length=32)
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "checkpoint_ns", "channel", "version"],
                name="threadblob_uniq",
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel}@{self.version} of session {self.session_id}"


class ThreadWrite(models.Model):
    """A pending write after checkpoint ``checkpoint_id`` of a thread's namespace: what task
    ``task_id`` (at ``task_path`` in the graph) wrote to ``channel``, its ``idx``-th write
    (negative for LangGraph's special channels: error -1, scheduled -2, interrupt -3, resume
    -4), as LangGraph's serializer made it (``type``, ``data``). A graph resumed from the
    checkpoint applies them instead of running the task again.

    Named by the checkpoint's id, not a foreign key: LangGraph saves a checkpoint and the
    writes after it from different threads, so a write may arrive before its checkpoint.
    """

    session = models.ForeignKey(
        "runs.AgentSession", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    checkpoint_ns = models.CharField(max_length=MAX_NAME_CHARS, blank=True)
    checkpoint_id = models.CharField(max_length=MAX_NAME_CHARS)
    task_id = models.CharField(max_length=MAX_NAME_CHARS)
    task_path = models.TextField(blank=True)
    idx = models.IntegerField()
    channel = models.CharField(max_length=MAX_NAME_CHARS)
    type = models.CharField(max_length=32)
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="threadwrite_uniq",
            )
        ]

    def __str__(self) -> str:
        return f"write {self.task_id}:{self.idx} after checkpoint {self.checkpoint_id}"
