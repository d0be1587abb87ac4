"""``approvals.selectors.pending_count``: pending requests of the given projects (or of all),
the count every page's navigation shows."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import pending_count
from projects.models import Project
from projects.services import project_default
from testsupport.factories import make_user, run_awaiting_approval

pytestmark = pytest.mark.django_db


def test_counts_the_pending_requests_of_the_given_projects(
    django_capture_on_commit_callbacks,
) -> None:
    capture = django_capture_on_commit_callbacks
    default = project_default()
    other = Project.objects.create(slug="other", name="Other")
    user = make_user("olga", "operator")
    for _ in range(2):
        run_awaiting_approval(user, capture=capture, project=default)
    run_awaiting_approval(user, capture=capture, project=other)
    decided = run_awaiting_approval(user, capture=capture, project=other)
    ApprovalRequest.objects.filter(run=decided).update(status=ApprovalStatus.APPROVED)
    assert pending_count(project_ids=[default.pk]) == 2
    assert pending_count(project_ids=[other.pk]) == 1
    assert pending_count(project_ids=[default.pk, other.pk]) == 3
    assert pending_count(project_ids=[]) == 0
    assert pending_count(project_ids=None) == 3
