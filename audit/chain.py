"""The hash rule of the audit chain and the signature of chain heads, shared by writing and
verifying; and the SQL fragments over audit's tables that other code composes into its own
statements (the executor's persistence seam, ``runs.store``), so that no other app names
audit's tables or the form of a chain's name.

Both are HMAC-SHA256 keyed with ``settings.AGENTOPS_AUDIT_KEY``, a key kept outside the
database: whoever can write the database (its owner, a superuser, a stolen backup restored
elsewhere) can still rewrite rows, but cannot compute the hashes and signatures that would make
the rewrite verify.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings

from audit.models import AuditChainHead, AuditEvent, run_chain

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


def _hmac(body: dict[str, Any], key: str | None) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    secret = (settings.AGENTOPS_AUDIT_KEY if key is None else key).encode()
    return hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()


def event_hash(fields: dict[str, Any], prev_hash: str, *, key: str | None = None) -> str:
    """HMAC-SHA256 hex digest, keyed with ``key`` (default ``settings.AGENTOPS_AUDIT_KEY``, as
    UTF-8), of the canonical JSON (sorted keys, no spaces) of ``fields`` (``HASHED_FIELDS``;
    others are ignored) and ``prev_hash``.

    Datetimes are hashed as their ``str()`` and UUIDs as their text, so the digest computed when
    writing equals the one recomputed from the stored row. Raises ``KeyError`` when a hashed
    field is missing.
    """
    body = {name: fields[name] for name in HASHED_FIELDS}
    body["prev_hash"] = prev_hash
    return _hmac(body, key)


def head_signature(
    chain: str, events: int, last_event_id: int, last_hash: str, *, key: str | None = None
) -> str:
    """HMAC-SHA256 hex digest, keyed like ``event_hash``, of the canonical JSON of a chain's
    head: its name, how many events it holds, the id and hash of the newest one (0 and
    ``GENESIS_HASH`` for a chain without events)."""
    body = {
        "chain": chain,
        "events": events,
        "last_event_id": last_event_id,
        "last_hash": last_hash,
    }
    return _hmac(body, key)


# A run's chain name is this prefix and the run's id (``audit.models.run_chain``).
_RUN_CHAIN_PREFIX = run_chain("")


def _heads_table() -> str:
    return AuditChainHead._meta.db_table


def heads_sql(count: int, *, lock: bool) -> str:
    """The SELECT of the heads of ``count`` chains named by ``%s`` parameters, as rows
    (chain, events, last event id, last hash); with ``lock``, ``FOR UPDATE``: the lock that
    serializes the writers of a chain."""
    marks = ", ".join(["%s"] * count)
    return (
        f"SELECT chain, events, last_event_id, last_hash FROM {_heads_table()} "  # noqa: S608
        f"WHERE chain IN ({marks}){' FOR UPDATE' if lock else ''}"
    )


def run_head_sql(run_id: str) -> str:
    """The SELECT, locked (``FOR UPDATE``), of the head of the chain of the run whose id is
    the SQL expression ``run_id`` (its name as ``audit.models.run_chain`` makes it), as one
    row (events, last event id, last hash) or none: for a LATERAL join after the run's own
    row lock (lock order: ``runs.transitions``)."""
    return (
        f"SELECT events, last_event_id, last_hash FROM {_heads_table()} "  # noqa: S608
        f"WHERE chain = '{_RUN_CHAIN_PREFIX}' || ({run_id})::text FOR UPDATE"
    )


def reserve_ids_sql() -> str:
    """The SELECT reserving ``%s`` (one parameter: how many) event ids from the events'
    sequence, one row each. Reserve them while holding the head lock of the chain they are
    for: its later writers then reserve larger ids, so its events commit in id order (what its
    live stream relies on). Ids never used are skipped (ids are increasing, not contiguous)."""
    table = AuditEvent._meta.db_table
    return f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, %s)"  # noqa: S608


def head_upsert_sql() -> str:
    """The INSERT ... ON CONFLICT that moves a chain's head, with parameters (chain, events,
    last event id, last hash, signature, the last hash it was read with): it changes no row
    when another transaction moved the head since (the caller checks that it changed one)."""
    heads = _heads_table()
    return f"""
INSERT INTO {heads} (chain, events, last_event_id, last_hash, signature)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (chain) DO UPDATE SET
    events = EXCLUDED.events, last_event_id = EXCLUDED.last_event_id,
    last_hash = EXCLUDED.last_hash, signature = EXCLUDED.signature
WHERE {heads}.last_hash = %s
"""  # noqa: S608


def _toggle_triggers(connection: Any, tables: list[str], enable: bool) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"ALTER TABLE {table} {'ENABLE' if enable else 'DISABLE'} TRIGGER USER")


def rehash_chains(model: Any, connection: Any, head_model: Any = None) -> int:
    """Recompute ``prev_hash`` and ``hash`` of every event of ``model`` (the ``AuditEvent``
    model, or a migration's historical one) under the current hash rule and key, chain by chain
    in id order; returns the number of events. For migrations that change the rule or the key.

    With ``head_model`` (``AuditChainHead``, or a historical one) the chain heads are rebuilt
    too, one per chain that has events, signed with the current key; chains that have a head
    and no events keep an empty (genesis) head. The append-only triggers are disabled meanwhile
    (``connection`` must be the tables' owner's) and enabled again before returning.
    """
    tables = [model._meta.db_table] + ([head_model._meta.db_table] if head_model else [])
    _toggle_triggers(connection, tables, enable=False)
    count = 0
    heads: dict[str, tuple[int, int, str]] = {}
    for event in model.objects.order_by("id").iterator():
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        events, _, event.prev_hash = heads.get(event.chain, (0, 0, GENESIS_HASH))
        event.hash = event_hash(fields, event.prev_hash)
        heads[event.chain] = (events + 1, event.pk, event.hash)
        model.objects.filter(pk=event.pk).update(prev_hash=event.prev_hash, hash=event.hash)
        count += 1
    if head_model is not None:
        for chain in head_model.objects.values_list("chain", flat=True):
            heads.setdefault(chain, (0, 0, GENESIS_HASH))
        head_model.objects.all().delete()
        head_model.objects.bulk_create(
            head_model(
                chain=chain,
                events=events,
                last_event_id=last_id,
                last_hash=last_hash,
                signature=head_signature(chain, events, last_id, last_hash),
            )
            for chain, (events, last_id, last_hash) in heads.items()
        )
    _toggle_triggers(connection, tables, enable=True)
    return count
