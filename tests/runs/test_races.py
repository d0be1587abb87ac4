"""Races resolved once: two workers on one step, many reviewers on one approval, approve vs
cancel. Threads with their own PostgreSQL connections; row locks decide."""

import pytest

import tests.tools  # noqa: F401  (registers the test tools)
from agentops.actors import Actor
from agentops.errors import Conflict
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.services import approval_decide
from audit.models import AuditEvent
from runs.control.create import run_create
from runs.control.lifecycle import run_cancel
from runs.executor.entry import run_advance, step_execute
from runs.models import RunStatus, StepStatus
from tests.tools import CALLS
from testsupport.concurrency import run_together
from testsupport.factories import make_run, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_workers_on_one_step_run_it_once(seeded, operator, held_messages):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="race",
        steps=[{"tool": "test_count", "args": {"race": 1}}],
    )
    run_advance(run_id=run.pk, actor=Actor.system())
    step = run.steps.get()
    assert step.status == StepStatus.QUEUED
    run_together(
        [
            lambda i=i: step_execute(step_id=step.pk, actor=Actor("worker", f"w{i}:1"))
            for i in range(2)
        ]
    )
    step.refresh_from_db()
    assert step.status == StepStatus.SUCCEEDED
    assert step.attempts == 1
    assert CALLS[step.idempotency_key] == 1
    assert (
        AuditEvent.objects.filter(
            object_type="step", object_id=str(step.pk), verb="step.running"
        ).count()
        == 1
    )


def pending_approval(operator):
    email = {"to": ["a@example.com"], "subject": "s", "body": "b"}
    run = make_run(operator, goal="mail", steps=[{"tool": "send_email", "args": email}])
    run_advance(run_id=run.pk, actor=Actor.system())
    return ApprovalRequest.objects.get(run=run)


def test_twenty_parallel_decisions_count_once(seeded, operator, held_messages):
    approval = pending_approval(operator)
    reviewers = [make_user(f"reviewer{i}", "reviewer") for i in range(20)]
    results = run_together(
        [
            lambda r=r, i=i: approval_decide(
                approval_id=approval.pk,
                actor=Actor.for_user(r),
                decision="approve" if i % 2 else "reject",
                comment=f"by {i}",
            )
            for i, r in enumerate(reviewers)
        ],
        expected=(Conflict,),
    )
    conflicts = [r for r in results if isinstance(r, Conflict)]
    assert len(conflicts) == 19, results
    assert ApprovalDecision.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED)


def test_approve_racing_cancel_ends_in_one_consistent_state(
    seeded, operator, reviewer, held_messages
):
    approval = pending_approval(operator)
    run_id = approval.run_id
    results = run_together(
        [
            lambda: approval_decide(
                approval_id=approval.pk,
                actor=Actor.for_user(reviewer),
                decision="approve",
                comment="ok",
            ),
            lambda: run_cancel(run_id=run_id, actor=Actor.for_user(operator), reason="stop"),
        ],
        expected=(Conflict,),
    )
    approval.refresh_from_db()
    run = approval.run
    run.refresh_from_db()
    step = approval.step
    step.refresh_from_db()
    if approval.status == ApprovalStatus.CANCELLED:
        # Cancel won: the late decision was refused.
        assert isinstance(results[0], Conflict)
        assert (run.status, step.status) == (RunStatus.CANCELLED, StepStatus.CANCELLED)
    else:
        # Approval won, then the cancel stopped the run before or while the step ran.
        assert approval.status == ApprovalStatus.APPROVED
        assert results[1].status == RunStatus.CANCELLED
        assert run.status == RunStatus.CANCELLED
        assert step.status == StepStatus.CANCELLED
