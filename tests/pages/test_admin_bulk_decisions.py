"""Bulk approve / reject in admin: a confirmation page first, which needs a comment; the
comment is recorded in every decision."""

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from testsupport.factories import make_user, run_awaiting_approval
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:approvals_approvalrequest_changelist"


@pytest.fixture
def three_waiting(operator, django_capture_on_commit_callbacks):
    return [
        run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks, goal=f"g{i}")
        for i in range(3)
    ]


@pytest.fixture
def admin_client(client, seeded):
    client.force_login(make_user("ada", superuser=True))
    return client


@pytest.mark.parametrize("action", ["approve_selected", "reject_selected"])
def test_a_bulk_action_shows_a_confirmation_page_and_changes_nothing(
    admin_client, three_waiting, action
):
    ids = [run.approvals.get().pk for run in three_waiting]
    with assert_unchanged():
        response = admin_client.post(
            reverse(CHANGELIST), {"action": action, "_selected_action": ids}
        )
    assert response.status_code == 200
    page = response.content.decode()
    assert "3 approval requests" in page
    assert 'name="comment"' in page
    for approval_id in ids:
        assert f'name="_selected_action" value="{approval_id}"' in page


@pytest.mark.parametrize("comment", ["", "   "])
def test_confirming_without_a_comment_is_refused(admin_client, three_waiting, comment):
    ids = [run.approvals.get().pk for run in three_waiting]
    data = {"action": "reject_selected", "_selected_action": ids, "apply": "yes"}
    with assert_unchanged():
        response = admin_client.post(reverse(CHANGELIST), {**data, "comment": comment})
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert set(ApprovalRequest.objects.values_list("status", flat=True)) == {"pending"}


def test_confirming_with_a_comment_records_it_in_each_decision(admin_client, three_waiting):
    ids = [run.approvals.get().pk for run in three_waiting]
    response = admin_client.post(
        reverse(CHANGELIST),
        {
            "action": "reject_selected",
            "_selected_action": ids[:2],
            "apply": "yes",
            "comment": "  Spam campaign: all from the same compromised account.  ",
        },
        follow=True,
    )
    assert "Recorded reject on 2 request(s)." in response.content.decode()
    for approval in ApprovalRequest.objects.filter(pk__in=ids[:2]):
        assert approval.status == ApprovalStatus.REJECTED
        decision = approval.decisions.get()
        assert decision.reviewer_name == "ada"
        assert decision.comment == "Spam campaign: all from the same compromised account."
    assert ApprovalRequest.objects.get(pk=ids[2]).status == ApprovalStatus.PENDING
