"""Each approval request has its own page (``/approvals/<id>/``), where every link to it leads;
a refused decision keeps what the reviewer typed, on the inbox and on that page."""

from __future__ import annotations

import html
import json

import pytest
from django.urls import reverse

from approvals.models import ApprovalStatus
from approvals.notifications import inbox_link
from projects.models import Project
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_the_page_of_a_request_shows_it_with_its_context_and_the_decision_form(
    client, reviewer, awaiting_run
):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    page = client.get(reverse("approval-detail", args=[approval.pk])).content.decode()
    assert f'data-approval-id="{approval.pk}"' in page
    assert "the user asked for the weekly report by mail" in page
    assert "42.0" in page  # the earlier calculate step's result, shown without opening
    assert f'action="/approvals/{approval.pk}/decide/"' in page
    assert 'name="back" value="request"' in page


def test_every_link_to_a_request_leads_to_its_page(client, reviewer, awaiting_run):
    approval = awaiting_run.approvals.get()
    path = f"/approvals/{approval.pk}/"
    client.force_login(reviewer)
    assert inbox_link(approval).endswith(path)
    assert approval.get_absolute_url() == path
    inbox = client.get(reverse("approval-inbox")).content.decode()
    assert f'href="{path}" data-detail-link' in inbox
    run_page = client.get(reverse("run-detail", args=[awaiting_run.pk])).content.decode()
    assert f'href="{path}" data-approval-link' in run_page


def test_a_decided_request_shows_its_outcome_and_no_form(
    client, reviewer, awaiting_run, django_capture_on_commit_callbacks
):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("approval-decide", args=[approval.pk]),
            {"decision": "reject", "comment": "not now", "back": "request"},
        )
    assert response["Location"] == f"/approvals/{approval.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "Rejected send_email" in page
    assert "This request is rejected: nothing is left to decide." in page
    assert "data-decide-form" not in page


def test_the_page_is_only_for_members_of_its_project(client, awaiting_run):
    url = reverse("approval-detail", args=[awaiting_run.approvals.get().pk])
    client.force_login(
        make_user("outsider", "reviewer", project=Project.objects.create(slug="b", name="B"))
    )
    assert client.get(url).status_code == 404
    assert client.get(reverse("approval-detail", args=[999999])).status_code == 404


def test_a_viewer_reads_the_page_without_a_form(client, awaiting_run):
    approval = awaiting_run.approvals.get()
    client.force_login(make_user("vera", "viewer", project=awaiting_run.project))
    page = client.get(reverse("approval-detail", args=[approval.pk])).content.decode()
    assert "send_email" in page
    assert "data-decide-form" not in page
    assert "only its reviewers may decide" in page


EDITED_BAD = '{"to": ["cfo@example.com"], "subject": "Q3", "body": "Total: 42",}'
EDITED_OFF_SCHEMA = '{"to": "not a list", "subject": "kept text"}'


@pytest.mark.parametrize(("text", "words"), [(EDITED_BAD, "not JSON"), (EDITED_OFF_SCHEMA, "args")])
def test_a_failed_edit_in_the_inbox_keeps_the_text(client, reviewer, awaiting_run, text, words):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    with assert_unchanged():
        response = client.post(
            reverse("approval-decide", args=[approval.pk]),
            {"decision": "approve", "comment": "my fix", "args": text, "place": "page=1"},
        )
    assert response["Location"] == f"/approvals/?page=1#approval-{approval.pk}"
    page = client.get(response["Location"]).content.decode()
    assert words in page
    assert html.escape(text) in page
    assert ">my fix</textarea>" in page
    assert f'id="edit-args-{approval.pk}" open' in page
    # Shown once: the next visit shows the request's own arguments again.
    again = client.get(response["Location"]).content.decode()
    assert html.escape(text) not in again
    assert html.escape(json.dumps(approval.step.args, indent=2)[:20]) in again


def test_a_failed_edit_on_the_requests_page_keeps_the_text(client, reviewer, awaiting_run):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    with assert_unchanged():
        response = client.post(
            reverse("approval-decide", args=[approval.pk]),
            {"decision": "approve", "args": EDITED_BAD, "back": "request"},
        )
    assert response["Location"] == f"/approvals/{approval.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "not JSON" in page
    assert html.escape(EDITED_BAD) in page
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_a_refused_rejection_does_not_open_the_editor_with_its_text(client, reviewer, awaiting_run):
    approval = awaiting_run.approvals.get()
    client.force_login(reviewer)
    with assert_unchanged():
        response = client.post(
            reverse("approval-decide", args=[approval.pk]),
            {"decision": "reject", "comment": " ", "args": EDITED_BAD, "back": "request"},
        )
    page = client.get(response["Location"]).content.decode()
    assert "give a reason" in page
    assert html.escape(EDITED_BAD) not in page
    assert f'id="edit-args-{approval.pk}" open' not in page
