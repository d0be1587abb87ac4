"""A worker that dies mid-step: the sweeper recovers the step without repeating an effect.

A crash is simulated by claiming the step (as a worker does) and never recording its outcome,
then letting the lease expire.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

import tests.tools  # noqa: F401  (registers the test tools)
from agentops.actors import Actor
from runs.control.lifecycle import run_cancel
from runs.executor.claim import Claim, claim_step
from runs.executor.entry import run_advance
from runs.executor.ledger import ledger_settle
from runs.executor.record import outcome_of, record_outcome, step_heartbeat
from runs.models import AttemptStatus, CallStatus, RunStatus, Step, StepStatus, ToolCall
from runs.recovery import sweep
from tests.tools import CALLS
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


def queued_step(operator, capture, tool):
    """A run whose only step is queued, its execute message 'lost' (not executed)."""
    run = make_run(operator, goal="t", steps=[{"tool": tool}])
    run_advance(run_id=run.pk, actor=Actor.system())
    step = run.steps.get()
    assert step.status == StepStatus.QUEUED
    return step


def crash_after_claim(step: Step) -> Claim:
    claim = claim_step(step.pk, Actor.worker())
    assert claim is not None
    Step.objects.filter(pk=step.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    return claim


def test_an_idempotent_step_whose_worker_died_runs_again(
    operator, django_capture_on_commit_callbacks
):
    step = queued_step(operator, django_capture_on_commit_callbacks, "test_count")
    crash_after_claim(step)
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep(actor=Actor.system("sweeper"))
    assert counts["lost"] == 1
    step.refresh_from_db()
    assert step.status == StepStatus.SUCCEEDED
    assert [a.status for a in step.attempt_set.all()] == [
        AttemptStatus.LOST,
        AttemptStatus.SUCCEEDED,
    ]
    assert step.attempt_set.first().error["type"] == "worker_lost"
    assert step.run.status == RunStatus.SUCCEEDED


def test_a_non_idempotent_call_with_unknown_outcome_is_not_repeated(
    operator, django_capture_on_commit_callbacks
):
    step = queued_step(operator, django_capture_on_commit_callbacks, "test_send")
    crash_after_claim(step)
    with django_capture_on_commit_callbacks(execute=True):
        sweep(actor=Actor.system("sweeper"))
    step.refresh_from_db()
    assert step.status == StepStatus.FAILED
    assert step.error["type"] == "outcome_unknown"
    assert CALLS.get(step.idempotency_key, 0) == 0
    assert step.run.status == RunStatus.FAILED


def test_an_effect_recorded_in_the_ledger_is_returned_not_repeated(
    operator, django_capture_on_commit_callbacks
):
    step = queued_step(operator, django_capture_on_commit_callbacks, "test_send")
    claim = claim_step(step.pk, Actor.worker())
    assert claim is not None
    outcome = outcome_of(claim, Actor.worker())
    # The effect happened and reached the ledger; the worker died before moving the step on.
    ledger_settle(claim.step, claim.plan, outcome, timezone.now())
    Step.objects.filter(pk=step.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        sweep(actor=Actor.system("sweeper"))
    step.refresh_from_db()
    assert step.status == StepStatus.SUCCEEDED
    assert step.result == 1
    assert CALLS[step.idempotency_key] == 1
    assert ToolCall.objects.get(idempotency_key=step.idempotency_key).status == CallStatus.SUCCEEDED


def test_a_heartbeat_extends_the_lease_until_it_is_lost(
    operator, django_capture_on_commit_callbacks
):
    step = queued_step(operator, django_capture_on_commit_callbacks, "test_count")
    claim = claim_step(step.pk, Actor.worker())
    assert claim is not None
    owner = Actor.worker().id
    assert step_heartbeat(step_id=step.pk, owner=owner, extend_seconds=600)
    step.refresh_from_db()
    assert step.lease_expires_at > timezone.now() + timedelta(seconds=500)
    assert not step_heartbeat(step_id=step.pk, owner="someone-else:1", extend_seconds=5)


def test_cancelling_while_a_step_runs_records_its_outcome_but_stops_the_run(
    operator, django_capture_on_commit_callbacks
):
    step = queued_step(operator, django_capture_on_commit_callbacks, "test_send")
    worker = Actor.worker()
    claim = claim_step(step.pk, worker)
    assert claim is not None
    outcome = outcome_of(claim, worker)  # the effect happens...
    run_cancel(run_id=step.run_id, actor=Actor.for_user(operator), reason="stop")
    with django_capture_on_commit_callbacks(execute=True):
        record_outcome(claim, outcome, worker)  # ...and is recorded after the cancel
    step.refresh_from_db()
    assert step.status == StepStatus.CANCELLED
    assert step.attempt_set.get().status == AttemptStatus.SUCCEEDED
    call = ToolCall.objects.get(idempotency_key=step.idempotency_key)
    assert (call.status, call.result) == (CallStatus.SUCCEEDED, 1)
    assert step.run.status == RunStatus.CANCELLED
