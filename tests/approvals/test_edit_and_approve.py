"""A reviewer fixes an argument and approves: the tool runs with the edited arguments under a
new idempotency key, the audit log keeps both versions, and approvals given to the old
arguments no longer count."""

from __future__ import annotations

import pytest
from django.core import mail

from agentops.actors import Actor
from agentops.errors import InvalidInput
from approvals.models import ApprovalRequest, ApprovalStatus, RiskRule
from approvals.risk import rules_changed
from approvals.services import approval_decide
from audit.models import AuditEvent
from runs.models import Run, RunStatus, ToolCall
from tests.api.conftest import approval_url, token_client
from testsupport.factories import EMAIL_ARGS, run_awaiting_approval
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

FIXED = {**EMAIL_ARGS, "body": "Refunded $600."}


def sent() -> list[tuple[str, str]]:
    """(body, idempotency key) of each mail the outside world got: Django's mail outbox,
    where ``send_email`` signs each body with its call's key."""
    found = []
    for message in mail.outbox:
        body, key = message.body.split("\n\n-- idempotency key ")
        found.append((body, key))
    return found


def _approve(approval, user, capture, args=None, comment=""):
    with capture(execute=True):
        return approval_decide(
            approval_id=approval.pk,
            actor=Actor.for_user(user),
            decision="approve",
            comment=comment,
            args=args,
        )


def test_the_tool_runs_with_the_edited_arguments_under_a_new_key(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    step = run.steps.get()
    old_key = step.idempotency_key
    _approve(
        ApprovalRequest.objects.get(run=run),
        reviewer,
        django_capture_on_commit_callbacks,
        args=FIXED,
        comment="wrong amount",
    )
    step.refresh_from_db()
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    assert sent() == [("Refunded $600.", step.idempotency_key)]
    assert step.args == FIXED
    assert step.idempotency_key != old_key
    assert list(ToolCall.objects.filter(step=step).values_list("idempotency_key", flat=True)) == [
        step.idempotency_key
    ]
    (edited,) = AuditEvent.objects.filter(run_id=run.pk, verb="step.args_edited")
    assert edited.payload["from"] == {"args": EMAIL_ARGS, "idempotency_key": old_key}
    assert edited.payload["to"] == {"args": FIXED, "idempotency_key": step.idempotency_key}
    assert (edited.actor_name, edited.payload["reason"]) == (reviewer.username, "wrong amount")


@pytest.mark.parametrize(
    ("decision", "args", "words"),
    [
        ("approve", {"to": "not-a-list"}, "args"),
        ("approve", ["a list"], "object"),
        ("reject", FIXED, "only an approval"),
    ],
)
def test_bad_edits_are_refused_and_change_nothing(
    operator, reviewer, django_capture_on_commit_callbacks, decision, args, words
):
    run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    with assert_unchanged(), pytest.raises(InvalidInput, match=words):
        approval_decide(
            approval_id=approval.pk, actor=Actor.for_user(reviewer), decision=decision, args=args
        )


def test_an_edit_discards_the_approvals_given_to_the_old_arguments(
    operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    RiskRule.objects.filter(pattern="send_*").update(risk="critical", required_approvals=2)
    rules_changed()  # an update around the ORM's signals
    capture = django_capture_on_commit_callbacks
    run = run_awaiting_approval(operator, capture=capture)
    approval = ApprovalRequest.objects.get(run=run)
    _approve(approval, reviewer, capture)
    _approve(approval, second_reviewer, capture, args=FIXED)
    approval.refresh_from_db()
    # The first approval was for arguments that no longer exist: one of two left.
    assert approval.status == ApprovalStatus.PENDING
    assert [d.reviewer_name for d in approval.decisions.all()] == [second_reviewer.username]
    assert mail.outbox == []
    _approve(approval, reviewer, capture)
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    assert [body for body, _ in sent()] == ["Refunded $600."]
    (discarded,) = AuditEvent.objects.filter(run_id=run.pk, verb="approval.approvals_discarded")
    assert discarded.payload["reviewers"] == [reviewer.username]


def test_the_api_approves_with_edited_arguments(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    approval = ApprovalRequest.objects.get(run=run)
    client = token_client(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            approval_url(approval.pk, "approve"),
            {"comment": "fixed the amount", "args": FIXED},
            format="json",
        )
    assert response.status_code == 200
    assert response.json()["status"] == "approved"
    assert run.steps.get().args == FIXED
    assert [body for body, _ in sent()] == ["Refunded $600."]
