"""The inbox at scale: key arguments on each line, identical requests grouped, counts per tool
and risk, and one decision on a selection, each request through the same rules and audited."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_decide
from audit.models import AuditEvent
from projects.models import Project
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

MAIL = {"tool": "send_email", "args": {"to": ["ops@example.com"], "subject": "s", "body": "b"}}
OTHER = {"tool": "send_email", "args": {"to": ["cfo@example.com"], "subject": "t", "body": "b"}}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def requests(make_run):
    """Three identical requests (MAIL) and one other (OTHER), oldest first."""
    runs = [make_run([MAIL], goal=f"mail {n}") for n in range(3)] + [make_run([OTHER])]
    return [run.approvals.get() for run in runs]


def test_each_line_shows_key_arguments_identical_count_and_the_counts(reviewer, requests):
    html = signed_in(reviewer).get(reverse("approval-inbox")).content.decode()
    assert "to=ops@example.com" in html
    assert "subject=s" in html
    assert html.count('data-identical="3"') == 3
    assert "data-identical=" not in html[html.index(f'id="approval-{requests[3].pk}"') :]
    assert "send_email (4)" in html
    assert "High (4)" in html


def test_identical_requests_are_listed_together(reviewer, requests):
    digest = requests[0].step.args_hash
    html = signed_in(reviewer).get(f"/approvals/?tool=send_email&same={digest}").content.decode()
    shown = {a.pk for a in requests if f'data-approval-id="{a.pk}"' in html}
    assert shown == {a.pk for a in requests[:3]}


def test_a_selection_is_rejected_with_one_comment_each_audited(
    reviewer, requests, django_capture_on_commit_callbacks
):
    ids = [a.pk for a in requests[:3]]
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(reviewer).post(
            reverse("approval-decide-bulk"),
            {"ids": ids, "decision": "reject", "comment": "duplicates", "place": "tool=send_email"},
            follow=True,
        )
    assert response.redirect_chain[-1][0] == "/approvals/?tool=send_email"
    assert "Rejected 3 requests." in response.content.decode()
    for approval in ApprovalRequest.objects.filter(pk__in=ids):
        assert approval.status == ApprovalStatus.REJECTED
        assert approval.decisions.get().comment == "duplicates"
    assert (
        AuditEvent.objects.filter(verb="approval.rejected", object_id__in=map(str, ids)).count()
        == 3
    )
    assert ApprovalRequest.objects.get(pk=requests[3].pk).status == ApprovalStatus.PENDING


def test_a_refused_request_is_reported_and_the_others_applied(
    reviewer, requests, django_capture_on_commit_callbacks
):
    decided = requests[0]
    approval_decide(approval_id=decided.pk, actor=Actor.for_user(reviewer), decision="approve")
    ids = [a.pk for a in requests[:3]]
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(reviewer).post(
            reverse("approval-decide-bulk"), {"ids": ids, "decision": "approve"}, follow=True
        )
    html = response.content.decode()
    assert "Approved 2 requests." in html
    assert f"Request #{decided.pk} was not decided: approval request is approved" in html
    assert decided.decisions.count() == 1
    for approval in requests[1:3]:
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.APPROVED


def test_a_rejection_of_a_selection_without_a_comment_changes_nothing(reviewer, requests):
    client = signed_in(reviewer)
    with assert_unchanged():
        response = client.post(
            reverse("approval-decide-bulk"),
            {"ids": [a.pk for a in requests], "decision": "reject", "comment": "  "},
            follow=True,
        )
    assert "give a reason" in response.content.decode()


@pytest.mark.parametrize("ids", [["x", "²", "9" * 40], []])
def test_bad_or_foreign_ids_change_nothing(reviewer, requests, ids):
    outsider = make_user("out", "reviewer", project=Project.objects.create(slug="b", name="B"))
    client = signed_in(outsider)
    with assert_unchanged():
        response = client.post(
            reverse("approval-decide-bulk"),
            {"ids": [*ids, requests[0].pk], "decision": "approve"},
            follow=True,
        )
    html = response.content.decode()
    assert response.status_code == 200
    assert "of the selected requests do not exist" in html
