"""Retention of approval rows: requests, their decisions and notifications go with the steps
and runs they belong to (``runs.retention`` calls this app's ``ApprovalRows``, registered at
start-up)."""

from __future__ import annotations

import uuid

from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet

from approvals.models import ApprovalRequest, ApprovalStatus
from runs.models import Run

# A request, its decisions and notifications in one statement (foreign keys are checked at
# commit).
_DELETE_FOR_STEPS = """
WITH requests AS (
    DELETE FROM approvals_approvalrequest WHERE step_id = ANY(%s) RETURNING id
), decisions AS (
    DELETE FROM approvals_approvaldecision WHERE approval_id IN (SELECT id FROM requests)
)
DELETE FROM approvals_notification WHERE approval_id IN (SELECT id FROM requests)
"""
_DELETE_FOR_RUNS = """
WITH requests AS (
    DELETE FROM approvals_approvalrequest WHERE run_id = ANY(%s) RETURNING id
), decisions AS (
    DELETE FROM approvals_approvaldecision WHERE approval_id IN (SELECT id FROM requests)
)
DELETE FROM approvals_notification WHERE approval_id IN (SELECT id FROM requests)
"""


class ApprovalRows:
    """Deletes the approval requests (with decisions and notifications) of steps and runs that
    retention deletes (``runs.retention.DependentRows``; PostgreSQL only, like the batches that
    call it), and keeps retention off runs with a pending request."""

    def exclude_open(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        pending = ApprovalRequest.objects.filter(run=OuterRef("pk"), status=ApprovalStatus.PENDING)
        return runs.filter(~Exists(pending))

    def delete_for_steps(self, step_ids: list[int]) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_DELETE_FOR_STEPS, [step_ids])

    def delete_for_runs(self, run_ids: list[uuid.UUID]) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_DELETE_FOR_RUNS, [run_ids])
