"""Four eyes on every step: whoever asked for a step may not decide its approval, even when
they hold the reviewer role and the run is someone else's."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from runs.control.create import run_create
from runs.models import StepStatus
from tests.api.conftest import approval_url, run_url, token_client
from testsupport.factories import EMAIL_ARGS, make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_an_operator_reviewer_cannot_approve_a_step_they_appended_to_anothers_run(
    operator, reviewer, django_capture_on_commit_callbacks
):
    both = make_user("mallory", "operator", "reviewer")
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(operator), agent="client", goal="someone else's")
    api = token_client(both)
    with django_capture_on_commit_callbacks(execute=True):
        appended = api.post(
            run_url(run.pk, "steps"), {"tool": "send_email", "args": EMAIL_ARGS}, format="json"
        )
    assert appended.status_code == 201
    approval = ApprovalRequest.objects.get(step_id=appended.json()["id"])
    # Neither over the API with a token nor as a superuser in the same position.
    with assert_unchanged():
        refused = api.post(approval_url(approval.pk, "approve"), {}, format="json")
    assert refused.status_code == 403
    assert "a step they asked for" in refused.json()["detail"]
    # Another reviewer may.
    with django_capture_on_commit_callbacks(execute=True):
        decided = token_client(reviewer).post(
            approval_url(approval.pk, "approve"), {}, format="json"
        )
    assert decided.status_code == 200
    assert run.steps.get().status == StepStatus.SUCCEEDED


def test_a_superuser_who_asked_for_a_step_cannot_decide_it(
    operator, django_capture_on_commit_callbacks
):
    root = make_user("root", superuser=True)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(operator), agent="client", goal="g")
    api = token_client(root)
    with django_capture_on_commit_callbacks(execute=True):
        step = api.post(
            run_url(run.pk, "steps"), {"tool": "send_email", "args": EMAIL_ARGS}, format="json"
        ).json()
    approval = ApprovalRequest.objects.get(step_id=step["id"])
    with assert_unchanged():
        refused = api.post(approval_url(approval.pk, "reject"), {"comment": "no"}, format="json")
    assert refused.status_code == 403
