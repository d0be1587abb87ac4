"""The only writer of audit events."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agentops import rows
from agentops.actors import Actor
from audit.chain import GENESIS_HASH, HASHED_FIELDS, event_hash
from audit.live import publish_on_commit
from audit.models import AuditEvent


def _lock_chain(chain: str) -> None:
    # Two transactions appending to one chain must not read the same predecessor. A run's
    # chain is only written under that run's row lock, which every service takes first; the
    # system chain has no such row, so a transaction-scoped advisory lock serializes it.
    if chain == SYSTEM_CHAIN and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [chain])


SYSTEM_CHAIN = "system"


def _chain_head(chain: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT hash FROM audit_auditevent WHERE chain = %s ORDER BY id DESC LIMIT 1", [chain]
        )
        row = cursor.fetchone()
    return row[0] if row else GENESIS_HASH


def _write(events: list[AuditEvent]) -> None:
    """Chain, hash and insert ``events`` (in order) with one head read per chain and one
    INSERT (plain SQL: this runs in every transaction of the executor), then publish them
    after commit."""
    heads: dict[str, str] = {}
    for event in events:
        if event.chain not in heads:
            _lock_chain(event.chain)
            heads[event.chain] = _chain_head(event.chain)
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        event.prev_hash = heads[event.chain]
        event.hash = heads[event.chain] = event_hash(fields, event.prev_hash)
    rows.insert(events)
    publish_on_commit(events)


class _Buffer(threading.local):
    events: list[AuditEvent] | None = None


_buffer = _Buffer()


@contextmanager
def audited_atomic() -> Iterator[None]:
    """``transaction.atomic()`` that writes the audit events recorded inside it together, just
    before it commits: one read of each chain's head and one INSERT, instead of both per event.

    Nested uses join the outermost block. Events recorded in an inner savepoint that rolls back
    while the outer block goes on would still be written: services raise instead.
    """
    if _buffer.events is not None:
        with transaction.atomic():
            yield
        return
    _buffer.events = []
    try:
        with transaction.atomic():
            yield
            # Detach the buffer before commit: on-commit callbacks (eager tasks) that record
            # events of their own must start their own block, not join this finished one.
            events, _buffer.events = _buffer.events, None
            if events:
                _write(events)
    finally:
        _buffer.events = None


def audit_record(
    *,
    actor: Actor,
    verb: str,
    object_type: str,
    object_id: Any,
    run_id: uuid.UUID | None = None,
    project_id: int | None = None,
    from_state: str = "",
    to_state: str = "",
    payload: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to the audit log and publish it to live clients after commit.

    Must be called inside the transaction that makes the change it records; inside
    ``audited_atomic`` the event is written when that block ends (its ``pk`` is None until
    then), inside a plain ``transaction.atomic`` at once. The event is chained to the previous
    event of the run's chain (``run:<run_id>``; the caller must hold the run's row lock), or of
    the ``system`` chain when ``run_id`` is None. ``project_id`` is the run's project: who may
    see the event.

    Raises:
        TransactionManagementError: called outside an atomic block.
    """
    if not connection.in_atomic_block:
        raise transaction.TransactionManagementError("audit_record needs an open transaction")
    event = AuditEvent(
        created_at=timezone.now(),
        chain=f"run:{run_id}" if run_id else SYSTEM_CHAIN,
        run_id=run_id,
        project_id=project_id,
        actor_kind=actor.kind,
        actor_id=actor.id,
        actor_name=actor.name,
        verb=verb,
        object_type=object_type,
        object_id=str(object_id),
        from_state=from_state,
        to_state=to_state,
        payload=payload or {},
    )
    if _buffer.events is not None:
        _buffer.events.append(event)
    else:
        _write([event])
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
