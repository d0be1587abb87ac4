"""Deleting memory: expired items (beat, ``memory.tasks.purge``), the items and history that
``MemoryRetentionPolicy`` rules let expire, a subject's items (their erasure), and the
provenance links to runs that run retention deletes (``MemoryProvenanceRows``).

Reads already skip an expired item (``memory.selectors.live_items``): the purge only bounds
how long its row stays. Each expired item leaves an ``expire`` version in its history; a
purge records one ``memory.purged`` event in the system audit chain with its counts.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.db import transaction
from django.db.models import Q, QuerySet

from agentops.actors import Actor
from audit.services import audit_purge_chains, audit_system, audited_atomic
from memory.models import (
    MemoryItem,
    MemoryOperation,
    MemoryRetentionPolicy,
    MemoryVersion,
    memory_chain,
)
from memory.namespaces import namespace_labels, namespace_path

# Items deleted per transaction, and audit events per purge transaction.
BATCH: Final = 500
_AUDIT_BATCH: Final = 1000


@dataclass
class MemoryPurge:
    """What one purge deleted: ``expired`` items, items and versions under retention
    policies (``retained_items``, ``versions``) and ``audit_chains`` purged."""

    expired: int = 0
    retained_items: int = 0
    versions: int = 0
    audit_chains: int = 0


def _expire_batch(now: datetime, actor: Actor) -> int:
    """Delete up to ``BATCH`` expired items (skipping those another transaction holds),
    keeping an ``expire`` version of each; returns how many."""
    with transaction.atomic():
        items = list(
            MemoryItem.objects.select_for_update(skip_locked=True)
            .filter(expires_at__lte=now)
            .order_by("expires_at")[:BATCH]
        )
        MemoryVersion.objects.bulk_create(
            MemoryVersion(
                item_id=item.pk,
                project_id=item.project_id,
                namespace_path=item.namespace_path,
                key=item.key,
                version=item.version,
                operation=MemoryOperation.EXPIRE,
                value=item.value,
                text=item.text,
                tags=item.tags,
                expires_at=item.expires_at,
                subject=item.subject,
                actor_kind=actor.kind,
                actor_name=actor.name,
                created_at=now,
            )
            for item in items
        )
        MemoryItem.objects.filter(pk__in=[item.pk for item in items]).delete()
    return len(items)


def _policy_items(policy: MemoryRetentionPolicy, cutoff: datetime) -> QuerySet[MemoryItem]:
    items = MemoryItem.objects.filter(updated_at__lt=cutoff)
    if policy.project_id is not None:
        items = items.filter(project_id=policy.project_id)
    if policy.namespace_prefix:
        path = namespace_path(namespace_labels(policy.namespace_prefix))
        items = items.filter(Q(namespace_path=path) | Q(namespace_path__startswith=f"{path}."))
    return items


def _policy_versions(policy: MemoryRetentionPolicy, cutoff: datetime) -> QuerySet[MemoryVersion]:
    """Versions older than ``cutoff`` of items that are gone, under the policy's scope."""
    versions = MemoryVersion.objects.filter(created_at__lt=cutoff).exclude(
        item_id__in=MemoryItem.objects.values("pk")
    )
    if policy.project_id is not None:
        versions = versions.filter(project_id=policy.project_id)
    if policy.namespace_prefix:
        path = namespace_path(namespace_labels(policy.namespace_prefix))
        versions = versions.filter(
            Q(namespace_path=path) | Q(namespace_path__startswith=f"{path}.")
        )
    return versions


def delete_items(item_ids: list[uuid.UUID]) -> tuple[int, int]:
    """Delete items ``item_ids`` (live or gone) and their versions in the caller's
    transaction; returns (items, versions) deleted. Their audit chains are the caller's to
    purge (``memory_chain``), after the commit."""
    items, _ = MemoryItem.objects.filter(pk__in=item_ids).delete()
    versions, _ = MemoryVersion.objects.filter(item_id__in=item_ids).delete()
    return items, versions


def _apply_policy(policy: MemoryRetentionPolicy, now: datetime, report: MemoryPurge) -> list[str]:
    cutoff = now - timedelta(days=policy.max_age_days)
    chains: list[str] = []
    for source in (_policy_items(policy, cutoff), _policy_versions(policy, cutoff)):
        field = "pk" if source.model is MemoryItem else "item_id"
        while True:
            ids = list(source.values_list(field, flat=True).distinct()[:BATCH])
            if not ids:
                break
            with transaction.atomic():
                items, versions = delete_items(ids)
            report.retained_items += items
            report.versions += versions
            chains.extend(memory_chain(pk) for pk in ids)
    return chains


def memory_purge(*, now: datetime, actor: Actor | None = None) -> MemoryPurge:
    """Delete expired items, then apply every enabled ``MemoryRetentionPolicy`` (items last
    written more than ``max_age_days`` days before ``now`` under its prefix, and the history
    of gone items as old), purge the audit chains of the items it deleted whole, and record
    ``memory.purged`` with the counts in the system chain (only when something went).
    Transactions of at most ``BATCH`` items; safe to run twice at once (expired items
    another purge holds are skipped)."""
    actor = actor or Actor.system("memory retention")
    report = MemoryPurge()
    while True:
        count = _expire_batch(now, actor)
        report.expired += count
        if count < BATCH:
            break
    chains: list[str] = []
    for policy in MemoryRetentionPolicy.objects.filter(enabled=True).order_by("pk"):
        chains.extend(_apply_policy(policy, now, report))
    if chains:
        audit_purge_chains(chains=chains, batch_size=_AUDIT_BATCH, actor=actor)
        report.audit_chains = len(chains)
    if any(asdict(report).values()):
        with audited_atomic():
            audit_system(
                actor=actor,
                verb="memory.purged",
                object_type="memory",
                object_id="purge",
                payload=asdict(report),
            )
    return report


def subject_items(*, project_id: int, subject: str) -> list[uuid.UUID]:
    """The ids of the items (live or gone) of ``subject`` in project ``project_id``: what
    the subject's erasure deletes (``delete_items``), their chains after it."""
    live = MemoryItem.objects.filter(project_id=project_id, subject=subject).values_list(
        "pk", flat=True
    )
    gone = MemoryVersion.objects.filter(project_id=project_id, subject=subject).values_list(
        "item_id", flat=True
    )
    return sorted(set(live) | set(gone))


class MemoryProvenanceRows:
    """Run retention's hook (``runs.retention.DependentRows``, registered by the runs app):
    the items whose provenance names a step, run or message being deleted lose that link
    (``SET_NULL``, done here because retention deletes with SQL); their history keeps the
    ids. Memory holds no run open."""

    def exclude_open(self, runs: QuerySet[Any]) -> QuerySet[Any]:
        return runs

    def delete_for_steps(self, step_ids: list[int]) -> None:
        MemoryItem.objects.filter(step_id__in=step_ids).update(step=None)

    def delete_for_runs(self, run_ids: list[uuid.UUID]) -> None:
        MemoryItem.objects.filter(source_message__run_id__in=run_ids).update(source_message=None)
        MemoryItem.objects.filter(run_id__in=run_ids).update(run=None)
