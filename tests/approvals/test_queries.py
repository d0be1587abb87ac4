"""``approvals.queries``: each hand-written statement counts what its ORM equivalent counts,
on the same rows (pending and decided requests, several projects)."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.queries import pending_count_sql
from projects.models import Project
from projects.services import project_default
from testsupport.factories import make_user, run_awaiting_approval

pytestmark = pytest.mark.django_db


def test_pending_count_equals_the_orm_count(django_capture_on_commit_callbacks) -> None:
    capture = django_capture_on_commit_callbacks
    default = project_default()
    other = Project.objects.create(slug="other", name="Other")
    third = Project.objects.create(slug="third", name="Third")
    user = make_user("olga", "operator")
    for project in (default, default, other, other, third):
        run_awaiting_approval(user, capture=capture, project=project)
    decided = run_awaiting_approval(user, capture=capture, project=other)
    ApprovalRequest.objects.filter(run=decided).update(status=ApprovalStatus.REJECTED)
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    assert pending_count_sql(project_ids=None) == pending.count() == 5
    for ids in ([default.pk], [other.pk], [default.pk, third.pk], [default.pk, other.pk, 999]):
        expected = pending.filter(run__project_id__in=ids).count()
        assert pending_count_sql(project_ids=ids) == expected
