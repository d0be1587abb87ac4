"""Reads of approval requests shared by the API, the inbox page and the live stream."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import F, Prefetch, QuerySet, Window
from django.db.models.functions import RowNumber

from approvals.models import ApprovalDecision, ApprovalRequest
from runs.models import Step


def approval_list(*, status: str | None = None) -> QuerySet[ApprovalRequest]:
    """Approval requests, oldest first (the reviewer's queue order), with their step, run and
    decisions loaded; optionally only those with ``status``."""
    qs = (
        ApprovalRequest.objects.select_related("step", "run", "run__requested_by")
        .prefetch_related(
            Prefetch("decisions", queryset=ApprovalDecision.objects.order_by("created_at"))
        )
        .order_by("created_at", "id")
    )
    if status:
        qs = qs.filter(status=status)
    return qs


def approval_inbox() -> QuerySet[ApprovalRequest]:
    """The pending approval requests a reviewer should decide, oldest first."""
    return approval_list(status="pending")


def earlier_steps(approvals: list[ApprovalRequest], *, limit: int) -> dict[int, list[Step]]:
    """The last ``limit`` steps before each approval's step in its run, in index order, keyed by
    approval id: what a reviewer reads before deciding. One query, whatever the runs' lengths."""
    if not approvals:
        return {}
    steps = (
        Step.objects.filter(
            run__approvals__in=[a.pk for a in approvals],
            index__lt=F("run__approvals__step__index"),
        )
        .annotate(
            approval_id=F("run__approvals__id"),
            newest_first=Window(
                RowNumber(), partition_by=F("run__approvals__id"), order_by=F("index").desc()
            ),
        )
        .filter(newest_first__lte=limit)
        .order_by("index")
    )
    found: dict[int, list[Step]] = defaultdict(list)
    for step in steps:
        found[step.approval_id].append(step)
    return found
