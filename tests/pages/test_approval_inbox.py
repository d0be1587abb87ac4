"""The approvals inbox shows what a reviewer needs and records decisions; refusals are messages."""

import pytest
from django.urls import reverse

from approvals.models import ApprovalStatus
from projects.models import Project
from runs.models import RunStatus
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def decide(client, approval_id, decision, comment=""):
    return client.post(
        reverse("approval-decide", args=[approval_id]),
        {"decision": decision, "comment": comment},
        follow=True,
    )


def test_inbox_shows_tool_args_rationale_and_earlier_results(client, reviewer, awaiting_run):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    response = client.get(reverse("approval-inbox"))
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-approval-id="{approval.pk}"' in html
    assert "send_email" in html
    assert "ops@example.com" in html
    assert "the user asked for the weekly report by mail" in html
    assert "send the weekly report" in html
    assert 'data-action="approve"' in html
    assert 'data-ws-path="/ws/approvals/"' in html
    # The card's context (goal, conversation, earlier results) is loaded when it is opened.
    context_url = reverse("approval-context", args=[approval.pk])
    assert f'data-lazy-src="{context_url}"' in html
    context = client.get(context_url).content.decode()
    assert "42.0" in context  # the earlier calculate step's result
    assert "send the weekly report" in context


def test_a_cards_context_is_only_for_members_of_its_project(client, awaiting_run):
    url = reverse("approval-context", args=[awaiting_run.approvals.get().pk])
    client.force_login(make_user("stranger"))
    assert client.get(url).status_code in (403, 404)
    client.force_login(
        make_user("outsider", "reviewer", project=Project.objects.create(slug="b", name="B"))
    )
    assert client.get(url).status_code == 404
    assert client.get(reverse("approval-context", args=[999999])).status_code == 404


def test_approving_continues_the_run(
    client, reviewer, awaiting_run, django_capture_on_commit_callbacks
):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = decide(client, approval.pk, "approve", "looks right")
    assert response.redirect_chain[-1][0] == reverse("approval-inbox")
    assert "Approved send_email" in response.content.decode()
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == RunStatus.SUCCEEDED
    assert approval.decisions.get().comment == "looks right"


def test_rejecting_fails_the_run(client, reviewer, awaiting_run):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    response = decide(client, approval.pk, "reject", "wrong list")
    assert "Rejected send_email" in response.content.decode()
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == RunStatus.FAILED


def test_deciding_an_already_decided_request_shows_a_message(
    client, reviewer, second_reviewer, awaiting_run
):
    approval = awaiting_run.approvals.get()
    client.force_login(second_reviewer)
    decide(client, approval.pk, "reject", "no")
    client.force_login(reviewer)
    response = decide(client, approval.pk, "approve")
    assert response.status_code == 200
    assert "approval request is rejected, not pending" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.REJECTED


def test_deciding_on_your_own_run_shows_a_message(client, operator, reviewer, awaiting_run):
    from projects.services import membership_set, project_default

    membership_set(project=project_default(), user=operator, role="admin")
    client.force_login(operator)
    inbox = client.get(reverse("approval-inbox")).content.decode()
    assert "You requested this run" in inbox
    with assert_unchanged():
        response = decide(client, awaiting_run.approvals.get().pk, "approve")
        assert "may not decide on a run they requested" in response.content.decode()


def test_user_without_reviewer_permission_gets_a_message(client, operator, awaiting_run):
    client.force_login(operator)  # a login is an audit event of its own
    with assert_unchanged():
        response = decide(client, awaiting_run.approvals.get().pk, "approve")
        assert "only reviewers may decide" in response.content.decode()


def test_bad_decision_and_unknown_request_show_messages(client, reviewer, awaiting_run):
    client.force_login(reviewer)
    with assert_unchanged():
        response = decide(client, awaiting_run.approvals.get().pk, "maybe")
        assert "decision must be one of" in response.content.decode()
    response = decide(client, 999999, "approve")
    assert "Approval request 999999 does not exist." in response.content.decode()


def test_empty_inbox_says_so(client, reviewer):
    client.force_login(reviewer)
    assert (
        "no approval request is pending" in client.get(reverse("approval-inbox")).content.decode()
    )
