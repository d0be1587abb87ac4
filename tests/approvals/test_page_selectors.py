"""``approvals.selectors.pending_count`` (pending requests of the given projects, or of all:
the count every page's navigation shows) and ``decisions_by_approval`` (the inbox's)."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, Decision
from approvals.selectors import decisions_by_approval, pending_count
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


def test_decisions_by_approval_are_each_requests_decisions_oldest_first(
    django_capture_on_commit_callbacks,
) -> None:
    capture = django_capture_on_commit_callbacks
    user = make_user("oleg", "operator")
    first, second, third = (
        ApprovalRequest.objects.get(run=run_awaiting_approval(user, capture=capture))
        for _ in range(3)
    )
    reviewers = [make_user(name, "reviewer") for name in ("ann", "bob", "cy")]
    made = [
        ApprovalDecision.objects.create(
            approval=approval, reviewer=reviewer, reviewer_name=reviewer.username, decision=kind
        )
        for approval, reviewer, kind in [
            (second, reviewers[0], Decision.APPROVE),
            (first, reviewers[1], Decision.REJECT),
            (second, reviewers[2], Decision.APPROVE),
        ]
    ]
    found = decisions_by_approval([first.pk, second.pk, third.pk])
    assert {pk: [d.pk for d in ds] for pk, ds in found.items()} == {
        first.pk: [made[1].pk],
        second.pk: [made[0].pk, made[2].pk],
    }
    assert found[second.pk][1].reviewer_name == "cy"
    assert decisions_by_approval([]) == {}
