"""A worker that finishes a step claims its run's next step itself, within its time slice.

The next step is queued and claimed in the transaction that records the previous outcome, so
no broker message is needed between them; past ``AGENTOPS_CLAIM_NEXT_SECONDS`` the step goes
to the queue instead. Broker messages are dropped here (on-commit work not executed) to show
which steps needed one.
"""

import pytest

from agentops.actors import Actor
from audit.models import AuditEvent
from audit.selectors import chain_verify
from runs.executor.entry import run_advance
from runs.models import RunStatus, StepStatus
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db

ECHO = {"tool": "echo", "args": {"value": 1}}


def statuses(run):
    return [s.status for s in run.steps.order_by("index")]


def test_a_worker_runs_the_next_steps_itself_without_broker_messages(
    operator, django_capture_on_commit_callbacks
):
    run = make_run(operator, goal="claim next", steps=[ECHO] * 3)
    with django_capture_on_commit_callbacks(execute=False):
        run_advance(run_id=run.pk, actor=Actor.worker(), execute=True)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert statuses(run) == [StepStatus.SUCCEEDED] * 3
    # Every transition still has its own audit event, in order, and the chain verifies.
    verbs = list(
        AuditEvent.objects.filter(run_id=run.pk, object_type="step", verb__in=[
            "step.queued", "step.running", "step.succeeded"
        ]).values_list("verb", flat=True)
    )  # fmt: skip
    assert verbs == ["step.queued", "step.running", "step.succeeded"] * 3
    assert chain_verify(f"run:{run.pk}").ok


def test_past_its_time_slice_a_worker_sends_the_next_step_to_the_queue(
    operator, django_capture_on_commit_callbacks, settings
):
    settings.AGENTOPS_CLAIM_NEXT_SECONDS = 0
    run = make_run(operator, goal="claim next", steps=[ECHO] * 3)
    with django_capture_on_commit_callbacks(execute=False):
        run_advance(run_id=run.pk, actor=Actor.worker(), execute=True)
    # Step 1 waits in the queue for its (here dropped) message; the sweeper re-sends one.
    assert statuses(run) == [StepStatus.SUCCEEDED, StepStatus.QUEUED, StepStatus.PENDING]


def test_a_step_that_needs_a_reviewer_stops_the_worker(
    operator, django_capture_on_commit_callbacks
):
    email = {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}}
    run = make_run(operator, goal="claim next", steps=[ECHO, email, ECHO])
    with django_capture_on_commit_callbacks(execute=False):
        run_advance(run_id=run.pk, actor=Actor.worker(), execute=True)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert statuses(run) == [
        StepStatus.SUCCEEDED,
        StepStatus.WAITING,
        StepStatus.PENDING,
    ]


def test_advancing_without_execute_only_queues_the_next_step(
    operator, django_capture_on_commit_callbacks
):
    run = make_run(operator, goal="claim next", steps=[ECHO] * 2)
    with django_capture_on_commit_callbacks(execute=False):
        run_advance(run_id=run.pk, actor=Actor.system())
    assert statuses(run) == [StepStatus.QUEUED, StepStatus.PENDING]
