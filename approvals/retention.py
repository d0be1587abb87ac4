"""Retention of approval rows: requests, their decisions, notifications and marks go with the
steps and runs they belong to (``runs.retention`` calls this app's ``ApprovalRows``,
registered at start-up)."""

from __future__ import annotations

import uuid

from django.db.models import Exists, OuterRef, QuerySet

from approvals.models import ApprovalRequest, ApprovalStatus
from runs.models import Run


class ApprovalRows:
    """Deletes the approval requests (with everything Django cascades to from them:
    decisions, notifications, marks) of steps and runs that retention deletes
    (``runs.retention.DependentRows``), and keeps retention off runs with a pending request."""

    def exclude_open(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` without those that have a pending approval request."""
        pending = ApprovalRequest.objects.filter(run=OuterRef("pk"), status=ApprovalStatus.PENDING)
        return runs.filter(~Exists(pending))

    def delete_for_steps(self, step_ids: list[int]) -> None:
        """Delete the requests of the steps ``step_ids`` and their dependent rows."""
        ApprovalRequest.objects.filter(step_id__in=step_ids).delete()

    def delete_for_runs(self, run_ids: list[uuid.UUID]) -> None:
        """Delete the requests of the runs ``run_ids`` and their dependent rows."""
        ApprovalRequest.objects.filter(run_id__in=run_ids).delete()
