"""A reviewer's own marks: snooze hides a request from their inbox alone until a time; assign
to me lists it under "Assigned to me"; each change audited; refusals change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from approvals.marks import approval_snooze
from approvals.models import ApprovalMark
from approvals.services import approval_decide
from audit.models import AuditEvent
from projects.models import Project
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def listed(client: Client, approval_id: int, query: str = "") -> bool:
    html = client.get(f"/approvals/{query}").content.decode()
    return f'data-approval-id="{approval_id}"' in html


def test_snooze_hides_a_request_from_my_inbox_only_until_unsnoozed(
    reviewer, second_reviewer, awaiting_run
):
    approval = awaiting_run.approvals.get()
    mine, theirs = signed_in(reviewer), signed_in(second_reviewer)
    url = reverse("approval-mark", args=[approval.pk])
    response = mine.post(url, {"action": "snooze", "hours": "4", "place": "sort=newest"})
    assert response["Location"] == "/approvals/?sort=newest"
    assert not listed(mine, approval.pk)
    assert listed(mine, approval.pk, "?show=snoozed")
    assert listed(theirs, approval.pk)
    mark = ApprovalMark.objects.get(approval=approval, user=reviewer)
    assert timedelta(hours=3) < mark.snoozed_until - timezone.now() <= timedelta(hours=4)
    event = AuditEvent.objects.get(verb="approval.snoozed", object_id=str(approval.pk))
    assert event.actor_name == "rita"
    mine.post(url, {"action": "unsnooze"})
    assert listed(mine, approval.pk)
    assert AuditEvent.objects.filter(verb="approval.unsnoozed").count() == 1


def test_assign_to_me_lists_it_under_mine(reviewer, awaiting_run, make_run):
    approval = awaiting_run.approvals.get()
    other = make_run(
        [{"tool": "send_email", "args": {"to": ["b@example.com"], "subject": "s", "body": "b"}}]
    )
    client = signed_in(reviewer)
    client.post(reverse("approval-mark", args=[approval.pk]), {"action": "assign"})
    assert listed(client, approval.pk, "?show=mine")
    assert not listed(client, other.approvals.get().pk, "?show=mine")
    assert "assigned to you" in client.get("/approvals/").content.decode()
    assert AuditEvent.objects.filter(verb="approval.assigned", object_id=str(approval.pk)).exists()


@pytest.mark.parametrize(
    "data", [{"action": "snooze", "hours": "5"}, {"action": "snooze"}, {"action": "nap"}]
)
def test_a_bad_mark_is_refused_and_changes_nothing(reviewer, awaiting_run, data):
    approval = awaiting_run.approvals.get()
    client = signed_in(reviewer)
    with assert_unchanged():
        response = client.post(reverse("approval-mark", args=[approval.pk]), data, follow=True)
    assert "Could not change your marks" in response.content.decode()


def test_another_projects_or_a_decided_request_cannot_be_marked(
    reviewer, awaiting_run, django_capture_on_commit_callbacks
):
    approval = awaiting_run.approvals.get()
    outsider = signed_in(
        make_user("out", "reviewer", project=Project.objects.create(slug="b", name="B"))
    )
    with assert_unchanged():
        response = outsider.post(
            reverse("approval-mark", args=[approval.pk]), {"action": "assign"}, follow=True
        )
    assert f"Approval request {approval.pk} does not exist" in response.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")
    with assert_unchanged(), pytest.raises(Conflict):
        approval_snooze(
            approval_id=approval.pk,
            actor=Actor.for_user(reviewer),
            until=timezone.now() + timedelta(hours=1),
        )


@pytest.mark.parametrize("offset", [timedelta(seconds=-1), timedelta(days=8)])
def test_a_snooze_outside_the_next_7_days_is_refused(reviewer, awaiting_run, offset):
    approval = awaiting_run.approvals.get()
    with assert_unchanged(), pytest.raises(InvalidInput, match="7 days"):
        approval_snooze(
            approval_id=approval.pk, actor=Actor.for_user(reviewer), until=timezone.now() + offset
        )
