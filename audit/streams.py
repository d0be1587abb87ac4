"""Gap-free reads of the audit log: which events a client resuming ``after`` an event id may be
given, in which order, and the cursor it resumes from next.

The hazard: event ids come from a sequence when a transaction inserts its events, and
transactions commit in another order. Transaction A takes id 5, B takes id 6, B commits first:
a reader between the two commits sees 6 but not 5; a client that resumes ``after=6`` would
never get 5. Two rules prevent it, one per kind of stream.

**One run** (``run_id`` given): id order. A run's events form one hash chain, and its writers
hold the chain head's row lock from before they take ids until they commit
(``audit.services._write``), so a run's events commit in id order: when an event is visible,
so is every earlier event of its run. ``audit_verify`` relies on the same order (each
``prev_hash`` is the previous id's hash). The cursor is the last event read.

**Across runs** (``/ws/runs/``, ``/ws/approvals/``): transaction order. Each event row holds
the id of the transaction that wrote it (``xact_id``, ``xid8``, filled by its default
``pg_current_xact_id()``: audit migration 0006). Events are handed out in (``xact_id``, ``id``)
order, and only those whose transaction is older than the oldest transaction of this database
still in progress (``_HORIZON``: ``pg_snapshot_xmin(pg_current_snapshot())`` less the other
databases' transactions): a transaction that may still commit has a larger ``xact_id`` than
every event handed out, so nothing can appear later before a position already passed. This is
the "high-water mark" of PostgreSQL event stores (Eventuous's and Marten's subscriptions to
all streams). The client's cursor is still an event id: ``after=N`` means "after event N's
position" (N's ``xact_id``, then N); an N that no longer exists (retention deleted it) stands
for the position of the newest event before it. The price: an event is handed out only once
every older writing transaction of this database has ended (milliseconds, unless one stays
open long: an idle-in-transaction session holds the cross-run streams back until it ends), and
the events of one run may come out of id order (the pages re-read their data on any event).

SQLite (a quick local start) has one writer at a time, so commit order is id order: the
per-run rule serves every stream there.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from audit.models import AuditEvent

_TABLE = AuditEvent._meta.db_table
# The oldest transaction that may still add events, as of this statement's snapshot: the
# oldest in progress (``pg_snapshot_xmin`` does the same, but counts the transactions of the
# cluster's other databases too, which cannot write this table: a session idle in a
# transaction there would stall every stream), else the first not yet begun. A transaction in
# progress counts as another database's only while ``pg_stat_activity`` (read after the
# snapshot) shows a backend of another database running it (a backend serves one database for
# its life); any other (prepared, ended since) counts as this database's. ``backend_xid`` is
# shown to every role, unlike the query text.
_HORIZON = """COALESCE((
    SELECT min(xid) FROM pg_snapshot_xip(pg_current_snapshot()) AS xid
    WHERE NOT EXISTS (
        SELECT FROM pg_stat_activity AS other
        WHERE other.datname IS DISTINCT FROM current_database()
          AND other.backend_xid::text = mod(xid::text::numeric, 4294967296)::text
    )
), pg_snapshot_xmax(pg_current_snapshot()))"""
# Events whose transaction ended before every transaction that may still add events began.
_SETTLED = f"xact_id < {_HORIZON}"
# The position of event %s (its transaction, then itself): that of the newest event with an id
# at or below it, or the start.
_AFTER = (
    f"(xact_id, id) > (COALESCE((SELECT xact_id FROM {_TABLE} WHERE id <= %s "  # noqa: S608
    "ORDER BY id DESC LIMIT 1), '0'::xid8), %s)"
)


def _by_transaction() -> bool:
    return connection.vendor == "postgresql"


def stream_events(
    *,
    after: int = 0,
    run_id: uuid.UUID | None = None,
    verb_prefix: str = "",
    project_ids: Iterable[int] | None = None,
    chain: str = "",
) -> QuerySet[AuditEvent]:
    """The events a client that has every event up to ``after`` (an event id, 0: none) may be
    given now, in stream order (see the module docstring): of one run (``run_id``) in id order,
    else of the projects ``project_ids`` (None: any, with the system chain's) and verb family
    ``verb_prefix`` in transaction order. Slice it for a page; the last event of a page is the
    cursor to resume from (``after``). ``chain`` (``audit.models.session_chain``): of that
    chain alone, in id order (its writers hold the session's lock, so its events commit in
    id order, as a run's do)."""
    qs = AuditEvent.objects.all()
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    if verb_prefix:
        qs = qs.filter(verb__startswith=verb_prefix)
    if chain:
        return qs.filter(chain=chain, id__gt=after).order_by("id")
    if run_id is not None or not _by_transaction():
        qs = qs.filter(id__gt=after).order_by("id")
        return qs.filter(run_id=run_id) if run_id is not None else qs
    # Constant SQL; `after` is a bound parameter.
    settled = RawSQL(f"{_AFTER} AND {_SETTLED}", (after, after), output_field=BooleanField())  # noqa: S611
    return qs.filter(settled).order_by(RawSQL("xact_id", ()), "id")


def stream_head(*, run_id: uuid.UUID | None = None, chain: str = "") -> int:
    """The cursor of a client that has seen the log as it is now: the id of the last event
    ``stream_events`` hands out now (of one run, when given; 0 when none). A page reads it
    before its data and gives it to its WebSocket as ``?after=``: whatever commits later comes
    after it. ``chain``: of that chain alone."""
    if chain:
        found = AuditEvent.objects.filter(chain=chain).order_by("-id").values_list("id").first()
        return found[0] if found else 0
    if run_id is not None or not _by_transaction():
        qs = AuditEvent.objects.order_by("-id")
        qs = qs.filter(run_id=run_id) if run_id is not None else qs
        return qs.values_list("id", flat=True).first() or 0
    # Constant SQL (the transaction horizon has no ORM expression).
    settled = AuditEvent.objects.filter(RawSQL(_SETTLED, (), output_field=BooleanField()))  # noqa: S611
    newest = settled.order_by(RawSQL("xact_id", ()).desc(), "-id")
    return newest.values_list("id", flat=True).first() or 0
