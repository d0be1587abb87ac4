"""The audit tests' shared run: a finished run with an audited chain."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import Run, RunStatus
from testsupport.factories import run_awaiting_approval

EMAIL = {"to": ["customer@example.com"], "subject": "Hello", "body": "Hi."}


@pytest.fixture
def finished_run(operator, reviewer, django_capture_on_commit_callbacks) -> Run:
    """A plan run that paused for approval, was approved and succeeded."""
    run = run_awaiting_approval(
        operator,
        capture=django_capture_on_commit_callbacks,
        before=[{"tool": "calculate", "args": {"expression": "6*7"}}],
        args=EMAIL,
        goal="audited",
    )
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(
            approval_id=ApprovalRequest.objects.get(run=run).pk,
            actor=Actor.for_user(reviewer),
            decision="approve",
        )
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.SUCCEEDED
    return run
