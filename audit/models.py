"""The append-only, hash-chained audit log."""

from django.db import models

from agentops.actors import ActorKind

# The chain of every event that belongs to no run.
SYSTEM_CHAIN = "system"
# The start of a session's chain name (``session_chain``).
SESSION_CHAIN_PREFIX = "session:"
# The system-chain event by which retention records the chains it purged.
PURGE_VERB = "audit.chains_purged"


def run_chain(run_id: object) -> str:
    """The name of the audit chain of the run ``run_id`` (a UUID or its text)."""
    return f"run:{run_id}"


def project_chain(project_id: object) -> str:
    """The name of the audit chain of the project ``project_id``: the changes of its policy
    (risk rules, grant), each with its before, after and diff (``runs.policy``)."""
    return f"project:{project_id}"


def session_chain(session_id: object) -> str:
    """The name of the audit chain of the session ``session_id`` (a UUID or its text): the
    events of the session itself (created, messages added or removed, compacted, its state
    written, closed); its runs' events stay in their runs' chains."""
    return f"{SESSION_CHAIN_PREFIX}{session_id}"


class AuditEvent(models.Model):
    """One recorded change: who did what to which object, from which state to which.

    Rows are written by ``audit.services.audit_record`` in the same transaction as the change
    they record, and never changed afterwards: a PostgreSQL trigger (migrations 0002, 0005)
    refuses UPDATE, DELETE and TRUNCATE unless the transaction set ``agentops.audit_purge`` and
    its current role is a member of ``agentops_retention`` (retention only).

    ``chain`` groups events into one hash chain: ``run:<uuid>`` for everything about one run,
    ``session:<uuid>`` for a session's own events (``session_chain``), ``system`` for the
    rest; ``project_id`` is the run's project, who may see the event (the
    ``system`` chain has none: superusers only). ``hash`` is the HMAC-SHA256, keyed with
    ``AGENTOPS_AUDIT_KEY`` (kept outside the database), of the canonical JSON of this row's
    fields and the previous event's ``hash`` in the same chain (``prev_hash``; 64 zeros for the
    first), so editing or deleting a row breaks every later hash of its chain, and whoever
    lacks the key cannot compute new ones. Deleting the newest events is caught by the chain's
    signed ``AuditChainHead`` (``manage.py verify_audit``).

    The actor and objects are copied as plain values, not foreign keys, so history survives the
    deletion of users and runs (habit taken from Zulip's ``RealmAuditLog``). ``id`` is the event id
    that the events API's ``?after=`` and WebSocket reconnects use.

    On PostgreSQL the table also has ``xact_id`` (``xid8``), the id of the transaction that
    wrote the row, filled by the database (migration 0006) and deliberately not a field here:
    the writer's INSERT names only fields, so the column's default always applies.
    ``audit.streams`` orders the cross-run live streams by it.
    """

    created_at = models.DateTimeField(db_index=True)
    chain = models.CharField(max_length=64)
    run_id = models.UUIDField(null=True, blank=True)
    project_id = models.BigIntegerField(
        null=True, blank=True, help_text="The run's project (a copied id); empty for the system"
    )
    actor_kind = models.CharField(max_length=16, choices=ActorKind.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_name = models.CharField(max_length=150, blank=True)
    verb = models.CharField(max_length=64, help_text="e.g. run.started, step.succeeded")
    object_type = models.CharField(max_length=32)
    object_id = models.CharField(max_length=64)
    from_state = models.CharField(max_length=32, blank=True)
    to_state = models.CharField(max_length=32, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["id"]
        # One successor per event: the database refuses a fork of a chain and a copied event.
        # Keyed by chain first, a run's events go to a page or two of the index; a unique
        # index on the hash (random) put nearly every event on a page of its own, written to
        # the WAL in full on its first change after each checkpoint: a third of a step's WAL
        # (benchmarks/HISTORY.md, 2026-11-26, 09:54; how: benchmarks/README.md, "WAL a step").
        constraints = [
            models.UniqueConstraint(fields=["chain", "prev_hash"], name="audit_chain_link_uniq")
        ]
        indexes = [
            models.Index(fields=["run_id", "id"], name="audit_run_id_idx"),
            models.Index(fields=["chain", "-id"], name="audit_chain_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.verb} {self.object_type}:{self.object_id}"


class AuditChainHead(models.Model):
    """The newest state of one hash chain, kept apart from its events and signed, so that
    deleting the newest events of a chain, or a whole chain, is seen by ``verify_audit``.

    Written by ``audit.services`` in the transaction that appends to the chain (one upsert per
    chain and transaction; its row lock also serializes writers of the chain), deleted with the
    chain by retention. ``events`` counts the chain's events, ``last_event_id`` and
    ``last_hash`` are the newest one's (0 and 64 zeros before the first); ``signature`` is the
    HMAC of these four values with ``AGENTOPS_AUDIT_KEY`` (``audit.chain.head_signature``).
    A PostgreSQL trigger (migration 0005) lets an UPDATE through only when it moves the head
    forward (more events, a later last event) and a DELETE or TRUNCATE only for retention.
    """

    chain = models.CharField(max_length=64, primary_key=True)
    events = models.BigIntegerField()
    last_event_id = models.BigIntegerField()
    last_hash = models.CharField(max_length=64)
    signature = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.chain}: {self.events} events up to #{self.last_event_id}"
