"""An edit of a waiting call's arguments leaves a trace: "edited by" and a diff on the run page
and in the inbox, and the audit row keeps the whole payload."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agentops.actors import Actor
from approvals.models import RiskRule
from approvals.risk import rules_changed
from approvals.services import approval_decide

pytestmark = pytest.mark.django_db

NEW_ADDRESS = "billing-office@example.com"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def edit(reviewer, approval, comment: str = "right mailbox") -> None:
    args = {**approval.step.args, "to": [NEW_ADDRESS]}
    approval_decide(
        approval_id=approval.pk,
        actor=Actor.for_user(reviewer),
        decision="approve",
        comment=comment,
        args=args,
    )


def test_the_run_page_marks_the_edit_with_who_and_the_diff(
    reviewer, operator, awaiting_run, django_capture_on_commit_callbacks
):
    approval = awaiting_run.approvals.get()
    with django_capture_on_commit_callbacks(execute=True):
        edit(reviewer, approval, comment="x" * 300)
    page = signed_in(operator).get(reverse("run-detail", args=[awaiting_run.pk])).content
    html = page.decode()
    mark = html[html.index("data-args-edited") :]
    assert "by rita" in mark[:400]
    assert 'data-diff-kind="changed"' in mark
    assert "ops@example.com" in mark  # before
    assert NEW_ADDRESS in mark  # after
    # The audit row keeps the whole payload (the 300-character reason), folded.
    assert "data-payload-full" in html
    assert "x" * 300 in html


def test_an_unedited_step_has_no_mark(operator, awaiting_run):
    html = signed_in(operator).get(reverse("run-detail", args=[awaiting_run.pk])).content
    assert b"data-args-edited" not in html


def test_the_inbox_shows_the_edit_to_the_next_reviewer(
    reviewer, second_reviewer, awaiting_run, django_capture_on_commit_callbacks
):
    RiskRule.objects.filter(pattern="send_*").update(required_approvals=2)
    rules_changed()
    approval = awaiting_run.approvals.get()
    approval.policy = {**approval.policy, "approvals": 2}
    approval.save(update_fields=["policy"])
    with django_capture_on_commit_callbacks(execute=True):
        edit(reviewer, approval)
    approval.refresh_from_db()
    assert approval.status == "pending"
    for path in (reverse("approval-inbox"), reverse("approval-detail", args=[approval.pk])):
        html = signed_in(second_reviewer).get(path).content.decode()
        mark = html[html.index("data-args-edited") :]
        assert "by rita" in mark[:400]
        assert "right mailbox" in mark[:600]
        assert NEW_ADDRESS in mark
