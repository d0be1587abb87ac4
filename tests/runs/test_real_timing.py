"""Timing paths with real worker processes, not eager tasks: a retry waits out its backoff, a
worker killed with SIGKILL mid-step is recovered once its lease expires, and a transaction
that rolls back sends nothing to the broker or to live clients.

The pure-logic checks here (``backoff_seconds``, an early wake-up refused) run eagerly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

import tests.tools  # noqa: F401  (registers the test tools)
from agentops import celery_app
from agentops.actors import Actor
from audit import live
from audit.models import AuditEvent
from projects.services import project_default
from runs.control.create import run_create
from runs.executor.entry import step_retry_due
from runs.executor.outcome import backoff_seconds
from runs.models import Run, Step, StepAttempt
from runs.recovery import sweep
from runs.statuses import AttemptStatus, RunStatus, StepStatus
from tests.conftest import Worker
from testsupport.factories import make_run
from testsupport.processes import wait_until

# Backoff of the retry test's worker: attempt 1's retry waits 1.5-3 s (equal jitter), more
# than the 1 s by which a wake-up may come early and still count as due.
RETRY_BASE_SECONDS = 3
# Lease margin of the crash test's worker: a lease is the tool's timeout (5 s) plus this.
LEASE_MARGIN_SECONDS = 1


@override_settings(AGENTOPS_RETRY_BASE_SECONDS=2, AGENTOPS_RETRY_MAX_SECONDS=300)
@pytest.mark.parametrize(
    ("attempt", "low", "high"), [(1, 1, 2), (2, 2, 4), (3, 4, 8), (9, 150, 300)]
)
def test_backoff_doubles_per_attempt_with_equal_jitter_up_to_the_cap(attempt, low, high):
    # eager: pure logic.
    delays = [backoff_seconds(attempt) for _ in range(200)]
    assert all(low <= d <= high for d in delays), (min(delays), max(delays))
    assert max(delays) - min(delays) > (high - low) / 4  # jittered, not one fixed value


@pytest.mark.django_db
def test_an_early_retry_wake_up_is_refused(operator, django_capture_on_commit_callbacks):
    # eager: pure logic of step_retry_due.
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="flaky",
            steps=[{"tool": "flaky", "args": {"failures": 5}}],
        )
    step = Step.objects.filter(run=run)
    # The autouse settings make every retry due at once; make this one due in a minute.
    step.update(status=StepStatus.WAITING_RETRY, next_attempt_at=timezone.now() + timedelta(60))
    attempts = StepAttempt.objects.filter(step__run=run).count()
    assert step_retry_due(step_id=step.get().pk, actor=Actor.worker()) is False
    assert (step.get().status, StepAttempt.objects.filter(step__run=run).count()) == (
        StepStatus.WAITING_RETRY,
        attempts,
    )


@pytest.fixture
def real_worker(
    request, tmp_path, transactional_db, seeded, only_this_tests_workers
) -> Iterator[Worker]:
    """A worker with the settings the test names (``request.param``), tasks sent to it."""
    worker = Worker(tmp_path / "worker.log", concurrency=1, include="tests.tools", **request.param)
    celery_app.conf.task_always_eager = False
    yield worker
    celery_app.conf.task_always_eager = True
    worker.stop()


def _ended(run: Run, timeout: float) -> Run:
    return wait_until(
        lambda: Run.objects.filter(pk=run.pk, status__in=["succeeded", "failed"]).first(),
        timeout,
        f"run {run.pk} to end",
    )


@pytest.mark.worker
@pytest.mark.parametrize(
    "real_worker",
    [{"AGENTOPS_RETRY_BASE_SECONDS": str(RETRY_BASE_SECONDS), "AGENTOPS_RETRY_MAX_SECONDS": "3"}],
    indirect=True,
)
def test_a_retry_waits_out_its_backoff(real_worker, operator):
    run = make_run(operator, goal="real", steps=[{"tool": "flaky", "args": {"failures": 1}}])
    assert _ended(run, 60).status == RunStatus.SUCCEEDED
    first, second = StepAttempt.objects.filter(step__run=run).order_by("number")
    (waiting,) = AuditEvent.objects.filter(run_id=run.pk, verb="step.waiting_retry")
    delay = waiting.payload["retry_in_s"]
    assert RETRY_BASE_SECONDS / 2 <= delay <= RETRY_BASE_SECONDS
    # The second attempt started no earlier than its countdown allows (a wake-up may come up
    # to 1 s early and still count as due).
    gap = (second.started_at - first.finished_at).total_seconds()
    assert gap >= delay - 1, (gap, delay)


@pytest.mark.worker
@pytest.mark.parametrize(
    "real_worker", [{"AGENTOPS_LEASE_MARGIN_SECONDS": str(LEASE_MARGIN_SECONDS)}], indirect=True
)
def test_a_worker_killed_mid_step_is_recovered_after_its_lease(real_worker, operator, tmp_path):
    # test_slow sleeps 3 s; its lease is its 5 s timeout + 1 s.
    run = make_run(operator, goal="real", steps=[{"tool": "test_slow", "args": {}}])
    step = wait_until(
        lambda: Step.objects.filter(run=run, status=StepStatus.RUNNING).first(), 30, "a claim"
    )
    real_worker.crash()
    with override_settings(AGENTOPS_LEASE_MARGIN_SECONDS=LEASE_MARGIN_SECONDS):
        wait_until(
            lambda: Step.objects.get(pk=step.pk).lease_expires_at < timezone.now(), 10, "lease"
        )
        assert sweep(actor=Actor.system("sweeper"))["lost"] == 1
    # The replacement must not purge the queue: the recovered step's wake-up is in it.
    replacement = Worker(
        tmp_path / "replacement.log", concurrency=1, include="tests.tools", purge=False
    )
    try:
        assert _ended(run, 60).status == RunStatus.SUCCEEDED
    finally:
        replacement.stop()
    lost, retried = StepAttempt.objects.filter(step=step).order_by("number")
    assert (lost.status, lost.error["type"]) == (AttemptStatus.LOST, "worker_lost")
    assert retried.status == AttemptStatus.SUCCEEDED
    assert retried.worker != lost.worker


@pytest.mark.worker
def test_a_rolled_back_transaction_sends_no_wake_up_and_no_live_event(
    transactional_db, seeded, operator, only_this_tests_workers
):
    celery_app.conf.task_always_eager = False
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete("celery")
    layer = get_channel_layer()
    group = live.runs_group(project_default().pk)

    async def subscribe() -> str:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        return channel

    channel = asyncio.run(subscribe())
    try:
        with transaction.atomic():
            make_run(
                operator, goal="real", steps=[{"tool": "echo", "args": {"value": "rolled back"}}]
            )
            transaction.set_rollback(True)
        assert broker.llen("celery") == 0
        assert not Run.objects.exists()
        # A committed run after it: its wake-up and events are the first to arrive.
        kept = make_run(operator, goal="real", steps=[{"tool": "echo", "args": {"value": "kept"}}])
        live.flush()
        assert broker.llen("celery") == 1
        message = asyncio.run(asyncio.wait_for(layer.receive(channel), 10))
        assert {e["run_id"] for e in message["events"]} == {str(kept.pk)}
    finally:
        asyncio.run(layer.group_discard(group, channel))
        broker.delete("celery")
        celery_app.conf.task_always_eager = True
