"""Leases and retries run on the database's clock: a worker whose clock is a minute off
neither steals a live lease nor lets its own expire early in others' eyes, and a retry it
schedules is due when the database says so (``agentops.clock``).

The step's lease here is 15 s (10 s timeout, 5 s margin), well inside the minute of skew: on
a host's clock, a worker a minute behind would write a lease that expired 45 s ago, and a
sweeper a minute ahead would find a fresh lease 45 s past.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import tests.tools  # noqa: F401  (registers the test tools)
from agentops.actors import Actor
from agentops.clock import DatabaseNow, database_now
from runs.executor.claim import claim_step
from runs.executor.entry import step_execute, step_retry_due
from runs.executor.record import step_heartbeat
from runs.models import Step, StepStatus
from runs.recovery import sweep
from tests.runs.test_lost_worker_recovery import queued_step
from testsupport.clock import clock_off_by

pytestmark = pytest.mark.django_db

SKEW = 60
LEASE = timedelta(seconds=15)


@pytest.fixture
def step(operator, settings, django_capture_on_commit_callbacks):
    """A queued step whose lease lasts 15 s."""
    settings.AGENTOPS_LEASE_MARGIN_SECONDS = 5
    queued = queued_step(operator, django_capture_on_commit_callbacks, "test_count")
    Step.objects.filter(pk=queued.pk).update(timeout_seconds=10)
    return queued


def _lease(step: Step) -> object:
    return Step.objects.values_list("lease_expires_at", flat=True).get(pk=step.pk)


def _running_after_sweep(step: Step, capture) -> bool:
    with capture(execute=False):
        counts = sweep(actor=Actor.system("sweeper"))
    status = Step.objects.values_list("status", flat=True).get(pk=step.pk)
    return counts["lost"] == 0 and status == StepStatus.RUNNING


def test_a_worker_whose_clock_is_behind_writes_its_lease_from_the_databases_clock(
    step, django_capture_on_commit_callbacks
):
    before = database_now()
    with clock_off_by(-SKEW):
        assert claim_step(step.pk, Actor.worker()) is not None
    after = database_now()
    assert before + LEASE <= _lease(step) <= after + LEASE
    # A sweeper with the right clock leaves the live lease alone.
    assert _running_after_sweep(step, django_capture_on_commit_callbacks)


def test_a_sweeper_whose_clock_is_ahead_does_not_take_a_live_lease(
    step, django_capture_on_commit_callbacks
):
    assert claim_step(step.pk, Actor.worker()) is not None
    with clock_off_by(SKEW):
        assert _running_after_sweep(step, django_capture_on_commit_callbacks)


def test_a_heartbeat_from_a_worker_whose_clock_is_behind_extends_from_the_databases_clock(
    step, django_capture_on_commit_callbacks
):
    claim = claim_step(step.pk, Actor.worker())
    assert claim is not None
    before = database_now()
    with clock_off_by(-SKEW):
        assert step_heartbeat(step_id=step.pk, owner=claim.step.lease_owner, extend_seconds=15)
    after = database_now()
    assert before + LEASE <= _lease(step) <= after + LEASE
    assert _running_after_sweep(step, django_capture_on_commit_callbacks)


def test_a_lease_past_by_the_databases_clock_is_recovered_by_a_sweeper_whose_clock_is_behind(
    step, django_capture_on_commit_callbacks
):
    assert claim_step(step.pk, Actor.worker()) is not None
    Step.objects.filter(pk=step.pk).update(lease_expires_at=DatabaseNow() - timedelta(seconds=1))
    with clock_off_by(-SKEW), django_capture_on_commit_callbacks(execute=False):
        assert sweep(actor=Actor.system("sweeper"))["lost"] == 1
    assert Step.objects.get(pk=step.pk).status != StepStatus.RUNNING


def test_a_retry_is_due_by_the_databases_clock_whichever_hosts_schedule_and_check_it(
    operator, settings, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_RETRY_BASE_SECONDS = 0  # the retry is due at once
    failing = queued_step(operator, django_capture_on_commit_callbacks, "test_crash")
    before = database_now()
    # A worker a minute ahead runs the tool, which fails: it schedules the retry...
    with clock_off_by(SKEW), django_capture_on_commit_callbacks(execute=False):
        step_execute(step_id=failing.pk, actor=Actor.worker())
    after = database_now()
    failed = Step.objects.get(pk=failing.pk)
    assert failed.status == StepStatus.WAITING_RETRY
    assert failed.next_attempt_at is not None
    assert before <= failed.next_attempt_at <= after
    # ...and the retry's wake-up reaches a worker a minute behind, which finds it due.
    with clock_off_by(-SKEW), django_capture_on_commit_callbacks(execute=False):
        assert step_retry_due(step_id=failing.pk, actor=Actor.worker())
    assert Step.objects.get(pk=failing.pk).status == StepStatus.QUEUED
