"""Runs and approval requests stored before gates existed keep waiting where they were: the
data migrations (runs 0005, approvals 0003) move them onto the approval gate unchanged."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Run, Step
from runs.statuses import RunStatus, StepStatus
from testsupport.migration_history import migrate_to_before, migrate_to_latest

BEFORE = [("runs", "0004_retention_policies"), ("approvals", "0002_default_risk_rules")]


def test_waiting_runs_steps_and_requests_move_onto_the_approval_gate(empty_database):
    old = migrate_to_before(BEFORE)
    run_id = uuid.uuid4()
    now = timezone.now()
    old_run = old.get_model("runs", "Run").objects.create(
        id=run_id, goal="legacy", agent="plan", status="awaiting_approval"
    )
    old_step = old.get_model("runs", "Step")
    waiting = old_step.objects.create(
        run=old_run,
        index=0,
        tool="send_email",
        args_hash="0" * 64,
        idempotency_key=f"{run_id}:0:send_email",
        risk="critical",
        required_approvals=2,
        status="awaiting_approval",
    )
    old_step.objects.create(
        run=old_run,
        index=1,
        tool="echo",
        args_hash="1" * 64,
        idempotency_key=f"{run_id}:1:echo",
        risk="low",
        required_approvals=0,
        status="pending",
    )
    old.get_model("approvals", "ApprovalRequest").objects.create(
        step=waiting,
        run=old_run,
        risk="critical",
        required_approvals=2,
        expires_at=now + timedelta(hours=1),
    )

    migrate_to_latest()

    run = Run.objects.get(pk=run_id)
    assert (run.status, run.gate, run.status_info.value) == (
        RunStatus.WAITING,
        "approval",
        "awaiting_approval",
    )
    first, second = Step.objects.filter(run=run).order_by("index")
    assert (first.status, first.gate, first.gate_params["approvals"]) == (
        StepStatus.WAITING,
        "approval",
        2,
    )
    assert (second.status, second.gate, second.gate_params) == (StepStatus.PENDING, "", {})
    request = ApprovalRequest.objects.get(step=first)
    assert request.required_approvals == 2
    assert request.rule.requester_may_decide is False
