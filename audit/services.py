"""The only writer of audit events and chain heads, and the only deleter (retention)."""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from agentops.actors import Actor
from audit.chain import (
    GENESIS_HASH,
    HASHED_FIELDS,
    event_hash,
    head_signature,
    head_upsert_sql,
    heads_sql,
)
from audit.context import current_actor
from audit.live import publish_on_commit
from audit.models import PURGE_VERB, SYSTEM_CHAIN, AuditChainHead, AuditEvent, run_chain

# The PostgreSQL role that alone may delete audit rows (migration 0005).
RETENTION_ROLE = "agentops_retention"
# Chains named in one purge record (one transaction deleting their heads).
_PURGE_RECORD_CHAINS = 500

_HEADS = AuditChainHead._meta.db_table
# A batch of a purged chain's events, newest first.
_DELETE_NEWEST = """
DELETE FROM audit_auditevent WHERE id IN (
    SELECT id FROM audit_auditevent WHERE chain = %s ORDER BY id DESC LIMIT %s
)
"""


# Chain heads by chain name: (events, last event id, last hash).
ChainHeads = dict[str, tuple[int, int, str]]


class ChainMoved(DatabaseError):
    """Another transaction appended to the chain between reading and moving its head: this
    transaction's events would fork the chain, so it must roll back (and may be retried)."""


class EventStatements(Protocol):
    """How the events of a transaction and their chains' heads reach the database: the
    statements ``audit.chain`` makes, run by whoever owns the connection's fast path
    (``audit_use_statements``). Each runs in the caller's transaction."""

    def fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of one query (``%s`` parameters)."""
        ...

    def insert(self, events: list[AuditEvent], *, returning: bool) -> None:
        """INSERT ``events`` in one statement; with ``returning``, set their primary keys
        from the database (else they are set already)."""
        ...

    def execute(self, sql: str, params: Sequence[Any], *, row: str, error: Exception) -> None:
        """Run one write of the chain head ``row`` and raise ``error`` unless it changed
        exactly one row (before the transaction can commit)."""
        ...


class _DjangoStatements:
    """``EventStatements`` through Django's cursor and ORM (before ``audit_use_statements``)."""

    def fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def insert(self, events: list[AuditEvent], *, returning: bool) -> None:
        AuditEvent.objects.bulk_create(events)

    def execute(self, sql: str, params: Sequence[Any], *, row: str, error: Exception) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.rowcount != 1:
                raise error


_statements: list[EventStatements] = [_DjangoStatements()]


def audit_use_statements(statements: EventStatements) -> None:
    """Run the audit writer's statements through ``statements`` from now on, in this process
    (the executor's persistence seam installs its own at start-up: ``RunsConfig.ready``)."""
    _statements[0] = statements


def _read_heads(chains: list[str]) -> ChainHeads:
    """The heads of ``chains`` that exist, as (events, last event id, last hash), locked until
    the transaction ends: the lock that serializes the writers of a chain (a run's chain is
    also only written under its run's row lock)."""
    lock = connection.features.has_select_for_update
    found = _statements[0].fetch(heads_sql(len(chains), lock=lock), chains)
    return {chain: (events, last_id, last_hash) for chain, events, last_id, last_hash in found}


def _write(events: list[AuditEvent], prefetched: _Prefetched | None) -> ChainHeads:
    """Chain, hash and insert ``events`` (in order) and move their chains' heads, then publish
    them after commit: one read of the chains' heads (locking them), one INSERT and one upsert
    per chain, through the installed ``EventStatements`` (this runs in every transaction of
    the executor). With ``prefetched`` (``audit_prefetched``), the heads it read and the event
    ids it reserved are used instead of reading them here. Returns each chain's new head as
    (events, last event id, last hash).

    Raises:
        IntegrityError: another transaction wrote the first events of a chain that had no head
            yet (nothing locked it): these would be a second successor of an event, which the
            database refuses (``audit_chain_link_uniq``).
        ChainMoved: another transaction moved a chain's head since it was read, so these
            events would fork the chain (a second check: the constraint refuses them first).
    """
    chains = list(dict.fromkeys(event.chain for event in events))
    heads: ChainHeads = {}
    ids: list[int] = []
    if prefetched is not None:
        heads = prefetched.heads()
        ids = prefetched.ids()
    missing = [chain for chain in chains if prefetched is None or chain not in prefetched.chains]
    if missing:
        heads.update(_read_heads(missing))
    before = {chain: heads.get(chain, (0, 0, GENESIS_HASH)) for chain in chains}
    counts = {chain: head[0] for chain, head in before.items()}
    last: dict[str, AuditEvent] = {}
    reserved = len(ids) >= len(events)
    for i, event in enumerate(events):
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        event.prev_hash = last[event.chain].hash if event.chain in last else before[event.chain][2]
        event.hash = event_hash(fields, event.prev_hash)
        if reserved:
            event.pk = ids[i]
        last[event.chain] = event
        counts[event.chain] += 1
    statements = _statements[0]
    statements.insert(events, returning=not reserved)
    moved: ChainHeads = {}
    for chain in chains:
        newest, count = last[chain], counts[chain]
        moved[chain] = (count, newest.pk, newest.hash)
        signature = head_signature(chain, count, newest.pk, newest.hash)
        statements.execute(
            head_upsert_sql(),
            [chain, count, newest.pk, newest.hash, signature, before[chain][2]],
            row=chain,
            error=ChainMoved(f"audit chain {chain} moved while this transaction wrote it"),
        )
    publish_on_commit(events)
    for listener in _committed_listeners:
        transaction.on_commit(functools.partial(listener, events), robust=True)
    return moved


# What apps above audit have asked to be told about committed events (``on_events_committed``).
_committed_listeners: list[Callable[[list[AuditEvent]], None]] = []


def on_events_committed(listener: Callable[[list[AuditEvent]], None]) -> None:
    """Have ``listener(events)`` called with the events of each write once its transaction has
    committed (never for one rolled back), in the committing process; a listener that raises
    is logged by Django (``robust``), never failing the change. Registered at start-up
    (``AppConfig.ready``) by an app that must react to another's changes without being
    imported by it (``fleet.traces`` exports finished runs)."""
    _committed_listeners.append(listener)


@dataclass
class _Prefetched:
    """What ``audit_prefetched`` was given: the heads of ``chains`` and reserved event ids."""

    chains: list[str]
    read_heads: Callable[[], list[tuple[Any, ...]]]
    read_ids: Callable[[], list[int]]

    def heads(self) -> ChainHeads:
        return {chain: (events, last, hashed) for chain, events, last, hashed in self.read_heads()}

    def ids(self) -> list[int]:
        return self.read_ids()


class _Buffer(threading.local):
    events: list[AuditEvent] | None = None
    prefetched: _Prefetched | None = None


_buffer = _Buffer()


def audit_prefetched(
    *,
    chains: list[str],
    read_heads: Callable[[], list[tuple[Any, ...]]],
    read_ids: Callable[[], list[int]],
) -> None:
    """Inside ``audited_atomic``: the heads of ``chains`` and reserved event ids, read by the
    caller (queued with its own first reads: ``runs.store``), which writing the block's
    events then uses instead of reads of its own. ``read_heads`` gives rows (chain, events,
    last event id, last hash) of the heads that exist, locked (``audit.chain.heads_sql`` or
    ``run_head_sql``); ``read_ids`` gives event ids reserved after those locks were taken
    (``audit.chain.reserve_ids_sql``), used when there are enough for the block's events.
    Both are called once the block's events are written.

    Raises:
        RuntimeError: not inside an ``audited_atomic`` block.
    """
    if _buffer.events is None:
        raise RuntimeError("audit_prefetched needs an audited_atomic block")
    _buffer.prefetched = _Prefetched(chains, read_heads, read_ids)


@contextmanager
def audited_atomic(
    *, within: Callable[[], AbstractContextManager[object]] | None = None
) -> Iterator[ChainHeads]:
    """``transaction.atomic()`` that writes the audit events recorded inside it together, just
    before it commits: one read of the chains' heads, one INSERT and one head upsert per chain,
    instead of all of them per event. ``within`` (the outermost block's) makes a context the
    block and the writing of its events run in, inside the transaction (a pipeline:
    ``runs.store.transaction.pipelined_atomic``).

    Nested uses join the outermost block. Events recorded in an inner savepoint that rolls back
    while the outer block goes on would still be written: services raise instead.

    Yields the heads the block's events move their chains to (chain → (events, last event
    id, last hash)), filled as the outermost block writes them, before it commits; a nested
    block's stays empty.
    """
    if _buffer.events is not None:
        with transaction.atomic():
            yield {}
        return
    _buffer.events = []
    moved: ChainHeads = {}
    try:
        with transaction.atomic(), within() if within is not None else nullcontext():
            yield moved
            # Detach the buffer before commit: on-commit callbacks (eager tasks) that record
            # events of their own must start their own block, not join this finished one.
            events, _buffer.events = _buffer.events, None
            prefetched, _buffer.prefetched = _buffer.prefetched, None
            if events:
                moved.update(_write(events, prefetched))
    finally:
        _buffer.events = None
        _buffer.prefetched = None


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
    chain: str | None = None,
) -> AuditEvent:
    """Append one event to the audit log and publish it to live clients after commit.

    Must be called inside the transaction that makes the change it records; inside
    ``audited_atomic`` the event is written when that block ends (its ``pk`` is None until
    then), inside a plain ``transaction.atomic`` at once. The event is chained to the previous
    event of the run's chain (``run:<run_id>``; the caller must hold the run's row lock), or of
    the ``system`` chain when ``run_id`` is None (its head's row lock serializes its writers),
    or of ``chain`` when given (``audit.models.session_chain``: the caller holds the
    session's row lock), and the chain's signed head (``AuditChainHead``) moves to it in the
    same transaction. ``project_id`` is the run's (or session's) project: who may see the
    event.

    Raises:
        TransactionManagementError: called outside an atomic block.
        IntegrityError: a concurrent first writer of a chain without a head won (see
            ``_write``).
    """
    if not connection.in_atomic_block:
        raise transaction.TransactionManagementError("audit_record needs an open transaction")
    event = AuditEvent(
        created_at=timezone.now(),
        chain=chain or (run_chain(run_id) if run_id else SYSTEM_CHAIN),
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
        _write([event], None)
    return event


def audit_system(
    *,
    actor: Actor | None = None,
    verb: str,
    object_type: str,
    object_id: Any,
    payload: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to the ``system`` chain (changes that belong to no run: users, roles,
    logins, settings; superusers see them) and return it.

    ``actor`` defaults to whoever is acting in this context (``audit.context.current_actor``:
    the request's user, else the process, e.g. ``manage.py createsuperuser``). Written in the
    caller's transaction when there is one (so it commits or rolls back with the change;
    inside ``audited_atomic`` when that block ends), else in a transaction of its own.
    ``payload`` must be JSON-serializable; never put secrets in it.
    """
    with transaction.atomic(savepoint=False):
        return audit_record(
            actor=actor or current_actor(),
            verb=verb,
            object_type=object_type,
            object_id=object_id,
            payload=payload,
        )


@contextmanager
def _as_retention_role(cursor: Any) -> Iterator[None]:
    """Inside a transaction: act as ``RETENTION_ROLE`` with the purge flag on, which the
    triggers require of a DELETE of audit rows (migration 0005), then switch back to the role
    and flag of before. On an error the transaction (or savepoint) rolls both back."""
    if connection.vendor != "postgresql":
        yield
        return
    cursor.execute("SELECT current_setting('role')")
    (role,) = cursor.fetchone()
    cursor.execute(
        "SELECT set_config('role', %s, true), set_config('agentops.audit_purge', 'on', true)",
        [RETENTION_ROLE],
    )
    yield
    cursor.execute(
        "SELECT set_config('agentops.audit_purge', 'off', true), set_config('role', %s, true)",
        [role],
    )


def audit_purge_chains(
    *, chains: list[str], batch_size: int, actor: Actor | None = None
) -> tuple[int, float]:
    """Delete ``chains`` whole (their events and heads) for retention; returns (events deleted,
    longest transaction in ms).

    First, per group of up to 500 chains, one transaction records the purge in the ``system``
    chain (``audit.chains_purged`` by ``actor``, default the system's retention, with
    ``{"chains": {chain: events its head counted, or None}}``) and deletes their heads; then
    each chain's events go newest first, in transactions of at most ``batch_size`` events.
    What an interrupted purge leaves is a valid prefix of a chain that the system chain says
    was purged, so verification tells a purge from a deletion. Every deletion runs as
    ``RETENTION_ROLE`` (``SET LOCAL ROLE``) with ``agentops.audit_purge`` set: the triggers
    refuse it to anyone else (migration 0005).

    Must not run inside ``audited_atomic``. Raises ``DatabaseError`` (permission denied) when
    the database role may not switch to ``RETENTION_ROLE`` (see the README).
    """
    deleted, longest_ms = 0, 0.0
    for start in range(0, len(chains), _PURGE_RECORD_CHAINS):
        group = chains[start : start + _PURGE_RECORD_CHAINS]
        started = time.monotonic()
        with transaction.atomic(), connection.cursor() as cursor:
            heads = _read_heads(group)
            audit_record(
                actor=actor or Actor.system("retention"),
                verb=PURGE_VERB,
                object_type="audit",
                object_id="chains",
                payload={"chains": {chain: heads.get(chain, (None,))[0] for chain in group}},
            )
            marks = ", ".join(["%s"] * len(group))
            with _as_retention_role(cursor):
                cursor.execute(f"DELETE FROM {_HEADS} WHERE chain IN ({marks})", group)  # noqa: S608
        longest_ms = max(longest_ms, (time.monotonic() - started) * 1000)
        for chain in group:
            while True:
                started = time.monotonic()
                with (
                    transaction.atomic(),
                    connection.cursor() as cursor,
                    _as_retention_role(cursor),
                ):
                    cursor.execute(_DELETE_NEWEST, [chain, batch_size])
                    count = cursor.rowcount
                longest_ms = max(longest_ms, (time.monotonic() - started) * 1000)
                deleted += count
                if count < batch_size:
                    break
    return deleted, longest_ms
