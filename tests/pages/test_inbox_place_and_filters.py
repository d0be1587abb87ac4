"""The inbox's filters, search and sort as GET parameters; a decision keeps the reviewer's
place (page, filters, the next card); a rejection needs a reason."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus
from runs.control.create import run_create
from runs.models import RunStatus
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

MAIL = {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}}


@pytest.fixture
def client_of():
    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


def shown_ids(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="card approval" data-approval-id="(\d+)"', page)]


@pytest.fixture
def mixed(make_run):
    """Three waiting requests, oldest first: the refund policy mail (marked critical, opened
    two days ago), then two invoice mails (high)."""
    first = make_run([MAIL], goal="mail the refund policy")
    second = make_run([MAIL], goal="mail the invoices")
    third = make_run([MAIL], goal="mail the quarterly invoices")
    ApprovalRequest.objects.filter(run=first).update(
        created_at=timezone.now() - timedelta(days=2), risk="critical"
    )
    return [r.approvals.get().pk for r in (first, second, third)]


def test_search_filters_and_sort_are_get_parameters(reviewer, client_of, mixed):
    first, second, third = mixed
    client = client_of(reviewer)
    assert shown_ids(client.get("/approvals/").content.decode()) == [first, second, third]
    assert shown_ids(client.get("/approvals/?sort=newest").content.decode()) == [
        third,
        second,
        first,
    ]
    assert shown_ids(client.get("/approvals/?q=INVOICES").content.decode()) == [second, third]
    assert shown_ids(client.get("/approvals/?risk=critical").content.decode()) == [first]
    assert shown_ids(client.get("/approvals/?age=1d").content.decode()) == [first]
    page = client.get("/approvals/?q=invoices&sort=newest").content.decode()
    assert shown_ids(page) == [third, second]
    assert "2 pending requests match (of 3)" in page
    assert shown_ids(client.get("/approvals/?tool=send_email&q=zzz").content.decode()) == []


def test_a_bad_filter_value_is_ignored_and_named(reviewer, client_of, mixed):
    page = client_of(reviewer).get("/approvals/?risk=urgent&run=not-a-uuid&age=1y")
    assert page.status_code == 200
    html = page.content.decode()
    assert shown_ids(html) == mixed
    assert "risk: Select a valid choice." in html
    assert "(ignored)" in html


def test_the_fragment_honours_the_same_parameters(reviewer, client_of, mixed):
    fragment = client_of(reviewer).get("/approvals/fragment/?q=refund").content.decode()
    assert shown_ids(fragment) == [mixed[0]]


def test_a_decision_returns_to_the_same_page_filters_and_the_next_card(
    reviewer, client_of, mixed, django_capture_on_commit_callbacks
):
    _, second, third = mixed
    client = client_of(reviewer)
    page = client.get("/approvals/?q=invoices&sort=newest").content.decode()
    assert 'name="place" value="q=invoices&amp;sort=newest"' in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/approvals/{third}/decide/",
            {
                "decision": "approve",
                "comment": "",
                "place": "q=invoices&sort=newest&page=3&evil=https://x.example",
                "next": str(second),
            },
        )
    assert response.status_code == 302
    assert response["Location"] == f"/approvals/?q=invoices&sort=newest&page=3#approval-{second}"
    assert ApprovalRequest.objects.get(pk=third).status == ApprovalStatus.APPROVED
    # Page 3 no longer exists: the last page is shown, still filtered.
    landed = client.get(response["Location"]).content.decode()
    assert shown_ids(landed) == [second]


def test_the_place_cannot_redirect_elsewhere(reviewer, client_of, mixed):
    response = client_of(reviewer).post(
        f"/approvals/{mixed[0]}/decide/",
        {"decision": "maybe", "place": "//evil.example/?page=2", "next": "javascript:x"},
    )
    assert response["Location"].startswith("/approvals/")
    assert "evil" not in response["Location"]
    assert "javascript" not in response["Location"]


@pytest.mark.parametrize("comment", ["", "   \n  "])
def test_a_rejection_without_a_reason_is_refused_and_changes_nothing(
    reviewer, client_of, awaiting_run, comment
):
    approval = awaiting_run.approvals.get()
    client = client_of(reviewer)
    with assert_unchanged():
        response = client.post(
            f"/approvals/{approval.pk}/decide/",
            {"decision": "reject", "comment": comment, "place": "page=2"},
        )
    assert response["Location"] == f"/approvals/?page=2#approval-{approval.pk}"
    page = client.get(response["Location"]).content.decode()
    assert "Could not record your rejection: give a reason" in page
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert not approval.decisions.exists()
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == RunStatus.WAITING


def test_rejecting_a_client_runs_step_says_the_agent_gets_the_reason(
    operator, reviewer, client_of, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(operator), agent="client", goal="g", steps=[MAIL])
    approval = ApprovalRequest.objects.get(run=run)
    response = client_of(reviewer).post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "reject", "comment": "not this address"},
        follow=True,
    )
    assert "Rejected send_email: the agent gets your reason as its outcome." in (
        response.content.decode()
    )
