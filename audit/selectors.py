"""Reads of the audit log shared by the API, the pages, the live streams and the verifier."""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from audit.chain import GENESIS_HASH, HASHED_FIELDS, event_hash, head_signature
from audit.models import PURGE_VERB, SYSTEM_CHAIN, AuditChainHead, AuditEvent, run_chain


def event_list(
    *,
    run_id: uuid.UUID | None = None,
    after: int = 0,
    verb_prefix: str = "",
    project_ids: Iterable[int] | None = None,
) -> QuerySet[AuditEvent]:
    """Events with ``id > after`` in id order, optionally of one run, verb family or set of
    projects (``project_ids``; None: any, including the system chain's)."""
    qs = AuditEvent.objects.filter(id__gt=after).order_by("id")
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    if verb_prefix:
        qs = qs.filter(verb__startswith=verb_prefix)
    return qs


@dataclass
class ChainReport:
    """The outcome of verifying one chain: ``events`` checked, ``broken_at`` the first bad
    event's id (None when the fault is not one event's, e.g. a deleted tail), ``reason`` what
    is wrong ("" when the chain verifies); ``purged`` when the system chain records that
    retention purged it."""

    chain: str
    events: int
    broken_at: int | None = None
    reason: str = ""
    purged: bool = False

    @property
    def ok(self) -> bool:
        return not self.reason


def purged_chains() -> set[str]:
    """The chains that retention purged, as the system chain records them
    (``audit.chains_purged`` events): trustworthy as far as the system chain verifies."""
    found: set[str] = set()
    for payload in AuditEvent.objects.filter(chain=SYSTEM_CHAIN, verb=PURGE_VERB).values_list(
        "payload", flat=True
    ):
        found.update(payload.get("chains", {}))
    return found


def _check_head(
    chain: str, head: AuditChainHead | None, count: int, last: AuditEvent | None, purged: bool
) -> str:
    """What is wrong with ``chain``'s head given what the table holds ("" if nothing)."""
    if head is None:
        if count and not purged:
            return f"{count} events but no chain head: the head was deleted, or the events forged"
        return ""
    expected = head_signature(chain, head.events, head.last_event_id, head.last_hash)
    if not hmac.compare_digest(expected, head.signature):
        return "the chain head's signature does not verify: the head was forged or altered"
    if count == 0 and head.events:
        return f"the head records {head.events} events but none are left: the chain was deleted"
    found = (count, last.pk if last else 0, last.hash if last else GENESIS_HASH)
    if found == (head.events, head.last_event_id, head.last_hash):
        return ""
    if count < head.events or found[1] < head.last_event_id:
        return (
            f"the head records {head.events} events up to event {head.last_event_id}, the table "
            f"holds {count} up to event {found[1]}: the newest events were deleted"
        )
    return (
        f"the head records {head.events} events up to event {head.last_event_id}, the table "
        f"holds {count} up to event {found[1]}: events were added past the head"
    )


def chain_verify(chain: str, *, purged: set[str] | None = None) -> ChainReport:
    """Verify ``chain``: recompute every keyed hash in id order (the first mismatch is
    reported at its event), then compare what the table holds with the chain's signed head.

    Reported: an event whose fields or hash were rewritten (also when the rewriter recomputed
    plain or wrongly keyed hashes), a deleted or inserted event (``prev_hash`` mismatch), the
    newest events deleted (the head is ahead of the table), a whole chain deleted (a head and
    no events), events without a head, and a head whose signature does not verify. A chain
    that retention purged (``purged``, default ``purged_chains()``) may have no head and part
    of its events. A chain deleted with its head and without a purge record leaves nothing to
    compare with: no check inside the database can see it (a copy of the heads kept elsewhere
    can).
    """
    was_purged = chain in (purged_chains() if purged is None else purged)
    prev = GENESIS_HASH
    count = 0
    last = None
    for event in AuditEvent.objects.filter(chain=chain).order_by("id").iterator():
        count += 1
        if event.prev_hash != prev:
            return ChainReport(
                chain,
                count,
                event.pk,
                "prev_hash does not match the previous event: an event before it was deleted",
                was_purged,
            )
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        if not hmac.compare_digest(event_hash(fields, prev), event.hash):
            return ChainReport(
                chain, count, event.pk, "hash does not match the event's fields", was_purged
            )
        prev = event.hash
        last = event
    head = AuditChainHead.objects.filter(chain=chain).first()
    reason = _check_head(chain, head, count, last, was_purged)
    return ChainReport(chain, count, None, reason, was_purged)


def chains(*, run_id: uuid.UUID | None = None) -> list[str]:
    """The chain names to verify: one run's, or every chain that has events or a head."""
    if run_id is not None:
        return [run_chain(run_id)]
    found = set(AuditEvent.objects.values_list("chain", flat=True).distinct())
    found.update(AuditChainHead.objects.values_list("chain", flat=True))
    return sorted(found)


def audit_verify(*, run_id: uuid.UUID | None = None) -> list[ChainReport]:
    """``chain_verify`` of every chain (``chains``), the purge records read once."""
    purged = purged_chains()
    return [chain_verify(chain, purged=purged) for chain in chains(run_id=run_id)]


def audit_chains_expired(*, older_than: Any, live_run_ids: Any) -> list[str]:
    """Run chains whose run no longer exists and whose newest event is older than
    ``older_than`` (an aware datetime): what audit retention may delete. ``live_run_ids`` is a
    query (or list) of the ids of the runs that still exist; their chains are kept."""
    # Start from the old events (the created_at index), not from every event of every chain:
    # most of the log is recent.
    newer = AuditEvent.objects.filter(chain=OuterRef("chain"), created_at__gte=older_than)
    return list(
        AuditEvent.objects.filter(run_id__isnull=False, created_at__lt=older_than)
        .exclude(run_id__in=live_run_ids)
        .exclude(Exists(newer))
        .values_list("chain", flat=True)
        .distinct()
    )
