"""The approval request state machine: every allowed and forbidden move, protection, races."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.policy import ApprovalPolicy
from runs.models import RunStatus, StepStatus
from testsupport.factories import run_row

pytestmark = pytest.mark.django_db

POLICY = ApprovalPolicy(approvals=1, ttl_seconds=3600)

METHODS = ["approve", "reject", "expire", "cancel"]
A = ApprovalStatus
# (source, method) → target, as ARCHITECTURE.md's approval model says.
ALLOWED = {
    (A.PENDING, "approve"): A.APPROVED,
    (A.PENDING, "reject"): A.REJECTED,
    (A.PENDING, "expire"): A.EXPIRED,
    (A.PENDING, "cancel"): A.CANCELLED,
}
FORBIDDEN = [
    (status, method)
    for status in ApprovalStatus.values
    for method in METHODS
    if (status, method) not in ALLOWED
]


def make_approval(status: str) -> ApprovalRequest:
    # Direct assignment of the protected status is forbidden, so the row is created in it.
    waiting = {
        "tool": "send_email",
        "args_hash": "0" * 64,
        "risk": "high",
        "gate": "approval",
        "gate_params": POLICY.as_json(),
        "status": StepStatus.WAITING,
    }
    run = run_row(RunStatus.WAITING, gate="approval", steps=[waiting])
    step = run.steps.get()
    return ApprovalRequest.objects.create(
        step=step,
        run=run,
        risk="high",
        policy=POLICY.as_json(),
        expires_at=timezone.now() + timedelta(hours=1),
        status=status,
    )


@pytest.mark.parametrize(("source", "method"), list(ALLOWED), ids=lambda v: str(v))
def test_allowed_transition_moves_and_records_the_decision_time(source, method):
    approval = make_approval(source)
    getattr(approval, method)(now=timezone.now())
    approval.save()
    saved = ApprovalRequest.objects.get(pk=approval.pk)
    assert saved.status == ALLOWED[(source, method)]
    assert saved.decided_at is not None


@pytest.mark.parametrize(("source", "method"), FORBIDDEN, ids=lambda v: str(v))
def test_forbidden_transition_raises(source, method):
    approval = make_approval(source)
    with pytest.raises(TransitionNotAllowed):
        getattr(approval, method)(now=timezone.now())
    assert ApprovalRequest.objects.get(pk=approval.pk).status == source


def test_every_status_and_method_is_covered():
    assert len(ALLOWED) + len(FORBIDDEN) == len(ApprovalStatus.values) * len(METHODS)
    field = ApprovalRequest._meta.get_field("status")
    assert {t.name for t in field.get_all_transitions(ApprovalRequest)} == set(METHODS)


def test_direct_assignment_of_status_is_refused():
    approval = make_approval(A.PENDING)
    with pytest.raises(AttributeError):
        approval.status = A.APPROVED
    assert ApprovalRequest.objects.get(pk=approval.pk).status == A.PENDING


def test_second_of_two_concurrent_decisions_conflicts():
    approval = make_approval(A.PENDING)
    first = ApprovalRequest.objects.get(pk=approval.pk)
    second = ApprovalRequest.objects.get(pk=approval.pk)
    first.approve(now=timezone.now())
    first.save()
    second.reject(now=timezone.now())
    # As django-fsm asks, save inside atomic(): the conflict rolls back the second change.
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        second.save()
    assert ApprovalRequest.objects.get(pk=approval.pk).status == A.APPROVED
