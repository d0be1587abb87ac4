"""Hand-written SQL of the approvals app's hot reads, each with the ORM query it must equal
(``tests/approvals/test_queries.py`` compares them on the same rows).

Only what every page pays for lives here: the ORM builds these statements in several times
the time PostgreSQL takes to answer them.
"""

from __future__ import annotations

from django.db import connection

from approvals.models import ApprovalStatus

_PENDING = "SELECT COUNT(*) FROM approvals_approvalrequest WHERE status = %s"
_PENDING_IN = (
    "SELECT COUNT(*) FROM approvals_approvalrequest AS a JOIN runs_run AS r ON r.id = a.run_id"
    " WHERE a.status = %s AND r.project_id IN ({})"
)


def pending_count_sql(*, project_ids: list[int] | None) -> int:
    """How many approval requests are pending in the projects ``project_ids`` (None: in
    every project, and those of no project; a non-empty list). One statement; equal to
    ``ApprovalRequest.objects.filter(status="pending"[, run__project_id__in=project_ids])
    .count()``."""
    with connection.cursor() as cursor:
        if project_ids is None:
            cursor.execute(_PENDING, [ApprovalStatus.PENDING.value])
        else:
            # One placeholder a project (any backend; a user has a few).
            places = ", ".join(["%s"] * len(project_ids))
            cursor.execute(_PENDING_IN.format(places), [ApprovalStatus.PENDING.value, *project_ids])
        (count,) = cursor.fetchone()
    return int(count)
