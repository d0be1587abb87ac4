"""A client run: the client app appends steps and says when it is done."""

import pytest

from agentops.actors import Actor
from agentops.errors import Conflict
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
