"""Fixtures of the evals tests."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from approvals.services import approval_decide
from testsupport.factories import run_awaiting_approval


@pytest.fixture
def rejected_run(operator, reviewer, django_capture_on_commit_callbacks):
    """``rejected_run(comment)``: a plan run of olivia's whose ``send_email`` step (index 0)
    rita rejected with ``comment``; the run has failed."""

    def make(comment: str):
        run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
        with django_capture_on_commit_callbacks(execute=True):
            approval_decide(
                approval_id=run.approvals.get().pk,
                actor=Actor.for_user(reviewer),
                decision="reject",
                comment=comment,
            )
        return run

    return make
