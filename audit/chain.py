"""The hash rule of the audit chain, shared by writing and verifying."""

import hashlib
import json
from typing import Any

GENESIS_HASH = "0" * 64

HASHED_FIELDS = (
    "created_at",
    "chain",
    "run_id",
    "project_id",
    "actor_kind",
    "actor_id",
    "actor_name",
    "verb",
    "object_type",
    "object_id",
    "from_state",
    "to_state",
    "payload",
)


def event_hash(fields: dict[str, Any], prev_hash: str) -> str:
    """SHA-256 hex digest of the canonical JSON of ``fields`` (``HASHED_FIELDS``) and ``prev_hash``.

    Datetimes are hashed as ISO 8601 strings and UUIDs as their text, so the digest computed when
    writing equals the one recomputed from the stored row.
    """
    body = {name: fields[name] for name in HASHED_FIELDS}
    body["prev_hash"] = prev_hash
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def rehash_chains(model: Any, connection: Any) -> int:
    """Recompute ``prev_hash`` and ``hash`` of every event of ``model`` (the ``AuditEvent``
    model, or a migration's historical one) under the current hash rule, chain by chain in id
    order; returns the number of events. For migrations that change the rule: the append-only
    trigger is disabled meanwhile (``connection`` must be the table owner's)."""
    postgresql = connection.vendor == "postgresql"
    table = model._meta.db_table
    if postgresql:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    count = 0
    heads: dict[str, str] = {}
    for event in model.objects.order_by("id").iterator():
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        event.prev_hash = heads.get(event.chain, GENESIS_HASH)
        event.hash = heads[event.chain] = event_hash(fields, event.prev_hash)
        model.objects.filter(pk=event.pk).update(prev_hash=event.prev_hash, hash=event.hash)
        count += 1
    if postgresql:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    return count
