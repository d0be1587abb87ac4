"""The only writer of audit events."""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from audit.actors import Actor
from audit.chain import GENESIS_HASH, event_hash
from audit.live import publish_on_commit
from audit.models import AuditEvent


def _lock_chain(chain: str) -> None:
    # Two transactions appending to one chain must not read the same predecessor: a
    # transaction-scoped advisory lock serializes appends per chain (released at commit).
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [chain])


def audit_record(
    *,
    actor: Actor,
    verb: str,
    object_type: str,
    object_id: Any,
    run_id: uuid.UUID | None = None,
    from_state: str = "",
    to_state: str = "",
    payload: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to the audit log and publish it to live clients after commit.

    Must be called inside the transaction that makes the change it records
    (``transaction.atomic``); the event is chained to the previous event of the run's chain
    (``run:<run_id>``), or of the ``system`` chain when ``run_id`` is None.

    Raises:
        TransactionManagementError: called outside an atomic block.
    """
    if not connection.in_atomic_block:
        raise transaction.TransactionManagementError("audit_record needs an open transaction")
    chain = f"run:{run_id}" if run_id else "system"
    _lock_chain(chain)
    last = AuditEvent.objects.filter(chain=chain).order_by("-id").values_list("hash", flat=True)
    prev_hash = last.first() or GENESIS_HASH
    fields: dict[str, Any] = {
        "created_at": timezone.now(),
        "chain": chain,
        "run_id": run_id,
        "actor_kind": actor.kind,
        "actor_id": actor.id,
        "actor_name": actor.name,
        "verb": verb,
        "object_type": object_type,
        "object_id": str(object_id),
        "from_state": from_state,
        "to_state": to_state,
        "payload": payload or {},
    }
    event = AuditEvent.objects.create(
        **fields, prev_hash=prev_hash, hash=event_hash(fields, prev_hash)
    )
    publish_on_commit(event)
    return event


def audit_purge_chains(*, chains: list[str], batch_size: int) -> tuple[int, float]:
    """Delete every event of ``chains`` (whole chains only), newest first, in transactions of at
    most ``batch_size`` events; returns (events deleted, longest batch in ms).

    Deleting newest first keeps what is left of an interrupted purge a valid prefix of its
    chain. Each transaction sets ``agentops.audit_purge`` so the append-only trigger lets the
    DELETE through (migration audit 0002); nothing else may delete audit events.
    """
    deleted, longest_ms = 0, 0.0
    for chain in chains:
        while True:
            started = time.monotonic()
            with transaction.atomic(), connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute("SET LOCAL agentops.audit_purge = 'on'")
                ids = list(
                    AuditEvent.objects.filter(chain=chain)
                    .order_by("-id")
                    .values_list("id", flat=True)[:batch_size]
                )
                if ids:
                    AuditEvent.objects.filter(id__in=ids).delete()
            longest_ms = max(longest_ms, (time.monotonic() - started) * 1000)
            deleted += len(ids)
            if len(ids) < batch_size:
                break
    return deleted, longest_ms
