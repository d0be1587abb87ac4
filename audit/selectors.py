"""Reads of the audit log shared by the API, the pages, the live streams and the verifier."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from audit.chain import GENESIS_HASH, HASHED_FIELDS, event_hash
from audit.models import AuditEvent


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
    """The outcome of verifying one chain: ``broken_at`` is the first bad event id, or None."""

    chain: str
    events: int
    broken_at: int | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_at is None


def chain_verify(chain: str) -> ChainReport:
    """Recompute every hash of ``chain`` in id order and report the first mismatch."""
    events: Iterable[AuditEvent] = AuditEvent.objects.filter(chain=chain).order_by("id").iterator()
    prev = GENESIS_HASH
    count = 0
    for event in events:
        count += 1
        if event.prev_hash != prev:
            return ChainReport(
                chain, count, event.pk, "prev_hash does not match the previous event"
            )
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        if event_hash(fields, prev) != event.hash:
            return ChainReport(chain, count, event.pk, "hash does not match the event's fields")
        prev = event.hash
    return ChainReport(chain, count)


def chains(*, run_id: uuid.UUID | None = None) -> list[str]:
    """The chain names to verify: one run's, or every chain in the log."""
    if run_id is not None:
        return [f"run:{run_id}"]
    return list(AuditEvent.objects.values_list("chain", flat=True).distinct().order_by("chain"))


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
