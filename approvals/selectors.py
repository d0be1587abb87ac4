"""Reads of approval requests shared by the API, the inbox page and the live stream."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from approvals.models import ApprovalDecision, ApprovalRequest


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
