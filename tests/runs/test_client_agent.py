"""A client run: the client app appends steps and says when it is done."""

import pytest

from agentops.actors import Actor
from agentops.errors import Conflict
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from runs.control.create import run_create, step_append
from runs.control.lifecycle import run_complete
from runs.models import RunStatus, StepStatus
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_client_run_idles_until_steps_arrive_and_succeeds_once_completed(
    operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="interactive")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    with django_capture_on_commit_callbacks(execute=True):
        step = step_append(
            actor=actor,
            run_id=run.pk,
            tool="calculate",
            args={"expression": "6*7"},
            rationale="the answer",
        )
    step.refresh_from_db()
    assert (step.status, step.result, step.index) == (StepStatus.SUCCEEDED, 42.0, 0)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    with django_capture_on_commit_callbacks(execute=True):
        run_complete(run_id=run.pk, actor=actor)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    with assert_unchanged(), pytest.raises(Conflict):
        step_append(actor=actor, run_id=run.pk, tool="echo", args={"value": 1})


def test_a_rejected_call_is_the_clients_feedback_and_the_run_goes_on(
    operator, reviewer, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        run = run_create(actor=actor, agent="client", goal="refund and tell the customer")
    with capture(execute=True):
        mail = step_append(
            actor=actor,
            run_id=run.pk,
            tool="send_email",
            args={"to": ["c@example.com"], "subject": "Refund", "body": "Refunded $6000."},
        )
    approval = ApprovalRequest.objects.get(step=mail)
    with capture(execute=True):
        approval_decide(
            approval_id=approval.pk,
            actor=Actor.for_user(reviewer),
            decision="reject",
            comment="the amount is wrong: $600",
        )
    mail.refresh_from_db()
    assert mail.status == StepStatus.REJECTED
    assert mail.error == {
        "type": "rejected",
        "reason": "the amount is wrong: $600",
        "message": "the amount is wrong: $600",
        "reviewer": reviewer.username,
    }
    run.refresh_from_db()
    assert (run.status, run.gate, run.error) == (RunStatus.RUNNING, "", None)
    # The client replans: a corrected call, then it is done.
    with capture(execute=True):
        fixed = step_append(
            actor=actor, run_id=run.pk, tool="calculate", args={"expression": "6000 / 10"}
        )
    with capture(execute=True):
        run_complete(run_id=run.pk, actor=actor)
    fixed.refresh_from_db()
    run.refresh_from_db()
    assert (fixed.index, fixed.status, fixed.result) == (1, StepStatus.SUCCEEDED, 600.0)
    assert run.status == RunStatus.SUCCEEDED
    verbs = list(
        AuditEvent.objects.filter(run_id=run.pk, object_type__in=["run", "step"])
        .order_by("id")
        .values_list("object_id", "verb")
    )
    step_verbs = [verb for object_id, verb in verbs if object_id == str(mail.pk)]
    assert step_verbs[-1] == "step.rejected"
    after_rejection = verbs[verbs.index((str(mail.pk), "step.rejected")) :]
    assert (str(run.pk), "run.running") in after_rejection
