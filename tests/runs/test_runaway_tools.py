"""Tools that cannot hang a worker, with real worker processes: a tool that overran its timeout
and still burns the CPU has its pool process replaced, and a tool stuck where its timeout cannot
fire (C code holding the GIL) is killed at the task's hard time limit, its step then recovered
by the sweeper under the ledger rules. Each time a following step runs on a fresh process.

The assertions are on events (what the database recorded, which processes are the worker's
children), with generous waits: nothing here times a duration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.utils import timezone

import tests.tools  # noqa: F401  (registers the test tools)
from agentops import celery_app
from agentops.actors import Actor
from runs.models import CallStatus, Run, Step, StepAttempt, ToolCall
from runs.recovery import sweep
from runs.statuses import AttemptStatus, RunStatus, StepStatus
from tests.conftest import Worker
from testsupport.factories import make_run
from testsupport.processes import child_pids, wait_until

pytestmark = [pytest.mark.long, pytest.mark.worker]


@pytest.fixture
def start_worker(
    tmp_path, transactional_db, seeded, only_this_tests_workers
) -> Iterator[Callable[..., Worker]]:
    """Starts the test's one worker (one pool process, the test tools loaded) with the settings
    it names; tasks go to it."""
    started: list[Worker] = []

    def start(**env: str) -> Worker:
        worker = Worker(tmp_path / "worker.log", 1, "tests.tools", True, **env)
        started.append(worker)
        return worker

    celery_app.conf.task_always_eager = False
    yield start
    celery_app.conf.task_always_eager = True
    for worker in started:
        worker.stop()


def _ended(run: Run) -> Run:
    return wait_until(
        lambda: Run.objects.filter(pk=run.pk, status__in=["succeeded", "failed"]).first(),
        60,
        f"run {run.pk} to end",
    )


def _pid(attempt: StepAttempt) -> int:
    """The pool process that ran ``attempt`` (its worker is named ``host:pid``)."""
    return int(attempt.worker.rsplit(":", 1)[1])


def _echo_pid(operator, worker: Worker) -> int:
    """Run a one-step run on ``worker``; the pool process that ran it, one of its children."""
    run = _ended(make_run(operator, goal="t", steps=[{"tool": "echo", "args": {"value": "ok"}}]))
    assert run.status == RunStatus.SUCCEEDED
    pid = _pid(StepAttempt.objects.get(step__run=run))
    assert child_pids(worker.pid) == [pid]
    return pid


def test_a_tool_spinning_past_its_timeout_has_its_pool_process_replaced(start_worker, operator):
    worker = start_worker(AGENTOPS_RUNAWAY_GRACE_SECONDS="1")
    first = _echo_pid(operator, worker)

    run = _ended(make_run(operator, goal="t", steps=[{"tool": "test_spin", "args": {}}]))
    step = Step.objects.get(run=run)
    assert (run.status, step.status) == (RunStatus.FAILED, StepStatus.FAILED)
    assert (step.error["type"], step.error["outcome_unknown"]) == ("timeout", True)
    assert _pid(step.attempt_set.get()) == first

    # The process left once its task was done; the pool started a fresh one.
    wait_until(
        lambda: first not in child_pids(worker.pid) and len(child_pids(worker.pid)) == 1,
        60,
        "the pool process with the spinning tool replaced",
    )
    assert _echo_pid(operator, worker) != first
    assert worker.alive


def test_a_tool_stuck_holding_the_gil_is_killed_at_the_hard_limit_and_not_repeated(
    start_worker, operator, tmp_path
):
    calls = tmp_path / "calls"
    # The step's timeout is 5 s, its lease 6 s; the task's hard limit comes first.
    worker = start_worker(AGENTOPS_TASK_HARD_LIMIT_SECONDS="3", AGENTOPS_LEASE_MARGIN_SECONDS="1")
    first = _echo_pid(operator, worker)

    run = make_run(
        operator, goal="t", steps=[{"tool": "test_send_stuck", "args": {"path": str(calls)}}]
    )
    step = wait_until(
        lambda: Step.objects.filter(run=run, status=StepStatus.RUNNING).first(), 60, "a claim"
    )
    wait_until(lambda: calls.exists(), 60, "the call")
    # Its timeout cannot fire (the tool holds the GIL): Celery kills the process at 3 s.
    wait_until(
        lambda: first not in child_pids(worker.pid) and len(child_pids(worker.pid)) == 1,
        60,
        "the pool process killed at the hard limit and replaced",
    )
    assert "Hard time limit (3" in worker.log.read_text(errors="replace")
    assert Step.objects.get(pk=step.pk).status == StepStatus.RUNNING

    wait_until(lambda: Step.objects.get(pk=step.pk).lease_expires_at < timezone.now(), 60, "lease")
    assert sweep(actor=Actor.system("sweeper"))["lost"] == 1
    step.refresh_from_db()
    assert (step.status, step.error["type"]) == (StepStatus.FAILED, "outcome_unknown")
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    lost = step.attempt_set.get()
    assert (lost.status, lost.error["type"], _pid(lost)) == (
        AttemptStatus.LOST,
        "worker_lost",
        first,
    )
    assert ToolCall.objects.get(idempotency_key=step.idempotency_key).status == CallStatus.STARTED

    # The worker goes on, on a fresh process; the effect happened once.
    assert _echo_pid(operator, worker) != first
    assert Path(calls).read_text().splitlines() == [step.idempotency_key]
