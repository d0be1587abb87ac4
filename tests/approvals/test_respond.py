"""A reviewer's response: the call is refused and the agent gets the reviewer's answer as its
outcome; audited as a decision; an empty response is refused and changes nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agentops.actors import Actor
from agentops.errors import InvalidInput
from approvals.models import ApprovalRequest, ApprovalStatus, Decision
from approvals.services import approval_decide
from audit.models import AuditEvent
from runs.models import Run, RunStatus, StepStatus
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

MAIL = {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}}
ANSWER = "Use the billing address on file, not this one."


@pytest.fixture
def client_approval(operator, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    run = make_run(operator, agent="client", goal="g", steps=[MAIL], capture=capture)
    return ApprovalRequest.objects.get(run=run)


def test_a_response_refuses_the_call_with_the_answer_as_its_outcome(
    reviewer, client_approval, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(
            approval_id=client_approval.pk,
            actor=Actor.for_user(reviewer),
            decision=Decision.RESPOND,
            comment=ANSWER,
        )
    client_approval.refresh_from_db()
    assert client_approval.status == ApprovalStatus.REJECTED
    step = client_approval.step
    step.refresh_from_db()
    assert step.status == StepStatus.REJECTED
    assert step.error == {
        "type": "responded",
        "reason": ANSWER,
        "message": ANSWER,
        "reviewer": "rita",
    }
    # A client agent replans on the answer: the run goes on.
    assert Run.objects.get(pk=client_approval.run_id).status != RunStatus.FAILED
    decision = client_approval.decisions.get()
    assert (decision.decision, decision.past_tense) == ("respond", "responded")
    audited = AuditEvent.objects.get(object_id=str(client_approval.pk), verb="approval.decision")
    assert audited.payload == {"decision": "respond", "comment": ANSWER}
    assert AuditEvent.objects.get(
        object_id=str(client_approval.pk), verb="approval.rejected"
    ).payload == {"comment": ANSWER, "decision": "respond"}


@pytest.mark.parametrize("text", ["", "  \n "])
def test_an_empty_response_is_refused_and_changes_nothing(reviewer, client_approval, text):
    with assert_unchanged(), pytest.raises(InvalidInput, match="response needs its text"):
        approval_decide(
            approval_id=client_approval.pk,
            actor=Actor.for_user(reviewer),
            decision=Decision.RESPOND,
            comment=text,
        )


def test_the_page_sends_a_response_and_refuses_an_empty_one(
    reviewer, client_approval, django_capture_on_commit_callbacks
):
    client = Client()
    client.force_login(reviewer)
    url = reverse("approval-decide", args=[client_approval.pk])
    with assert_unchanged():
        refused = client.post(url, {"decision": "respond", "comment": " "}, follow=True)
    assert "Could not send your response" in refused.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post(url, {"decision": "respond", "comment": ANSWER}, follow=True)
    assert (
        "Responded to send_email: the call is refused and the agent gets your answer as its "
        "outcome." in sent.content.decode()
    )
    client_approval.refresh_from_db()
    assert client_approval.status == ApprovalStatus.REJECTED
