"""Celery tasks: thin wrappers that take ids and call one service.

The broker only carries wake-ups; every task re-reads the database and returns when there
is nothing to do, so a lost or duplicated message is harmless. A task that loses its database
connection (a restarted or terminated server connection) is retried shortly, on a fresh
connection (``agentops.celery.close_broken_connections``), instead of waiting for the sweeper.

A tool cannot hang a worker (``StepTask``): a pool process where a tool overran its timeout
and still runs replaces itself after the task, and a task that outlives its hard time limit
(a tool stuck where even its timeout cannot fire) has its process killed and replaced by
Celery. Either way the steps are recovered by the ledger rules.
"""

import logging
import uuid
from typing import Any

import billiard
from billiard.process import current_process
from celery import Task, shared_task
from celery.signals import worker_init
from django.conf import settings
from django.db import InterfaceError, OperationalError

from agentops.actors import Actor
from agentops.celery import send_or_drop
from agentops.errors import Conflict
from runs import purges, recovery
from runs.control import compaction, sessions
from runs.executor import entry
from runs.executor.call import runaway_tool_threads
from runs.tools import all_tools

logger = logging.getLogger(__name__)


class DatabaseTask(Task):
    """A task retried on a lost database connection: up to 5 times, after about 1, 2, 4, 8,
    16 s (jittered)."""

    autoretry_for = (OperationalError, InterfaceError)
    retry_backoff = 1
    retry_backoff_max = 30
    max_retries = 5


# The billiard releases whose pool worker (``billiard.pool.Worker``, a pool process's
# ``_target``) keeps its restart sentinel in the private ``_shutdown`` and ends between two
# tasks once it is set. Celery has no public way for a task to have its own process replaced.
POOL_RESTART_BILLIARD = ("4.2.", "4.3.")


def leave_pool_after_this_task() -> bool:
    """Ask the pool to replace this process once its task's result is delivered: billiard
    ends a pool process, between two tasks, whose restart sentinel is set (the sentinel exists
    with ``CELERY_WORKER_POOL_RESTARTS``). False when this is no pool process with one (an
    eager task, a solo pool): nothing replaces it then; also on a billiard release not in
    ``POOL_RESTART_BILLIARD`` (logged: the hard time limit still replaces the process).
    ``tests/runs/test_pool_restart.py::test_pool_restart_sentinel_on_the_installed_billiard``
    fails on such a release."""
    version = str(getattr(billiard, "__version__", ""))  # not in billiard's type stubs
    if not version.startswith(POOL_RESTART_BILLIARD):
        logger.warning(
            "billiard %s: a pool process left with a runaway tool is not replaced after its "
            "task (written for billiard %s)",
            version,
            ", ".join(POOL_RESTART_BILLIARD),
        )
        return False
    sentinel = getattr(getattr(current_process(), "_target", None), "_shutdown", None)
    if sentinel is None:
        return False
    sentinel.set()
    return True


def hard_time_limit_seconds() -> int:
    """The hard time limit of a task that executes steps, in seconds:
    ``AGENTOPS_TASK_HARD_LIMIT_SECONDS``, or when that is 0 the longest time such a task may
    legitimately take: claiming next steps for ``AGENTOPS_CLAIM_NEXT_SECONDS``, then the
    longest step timeout (the registered tools' and ``AGENTOPS_DEFAULT_STEP_TIMEOUT_SECONDS``)
    with the lease margin and ``AGENTOPS_RUNAWAY_GRACE_SECONDS``."""
    if settings.AGENTOPS_TASK_HARD_LIMIT_SECONDS:
        return int(settings.AGENTOPS_TASK_HARD_LIMIT_SECONDS)
    longest = max(
        [settings.AGENTOPS_DEFAULT_STEP_TIMEOUT_SECONDS]
        + [tool.timeout_seconds for tool in all_tools()]
    )
    return int(
        settings.AGENTOPS_CLAIM_NEXT_SECONDS
        + longest
        + settings.AGENTOPS_LEASE_MARGIN_SECONDS
        + settings.AGENTOPS_RUNAWAY_GRACE_SECONDS
    )


class StepTask(DatabaseTask):
    """A task that executes steps, so runs tools.

    A tool that overruns its timeout is abandoned in its thread, which Python cannot stop: a
    CPU-bound one would go on burning the process's interpreter under every later task. When
    one is still running ``AGENTOPS_RUNAWAY_GRACE_SECONDS`` after the task, the pool process
    leaves once the task's result is delivered and the pool starts a fresh one; the outcome
    (a ``timeout``, outcome unknown) is on record already.

    A tool stuck where its timeout cannot fire (C code holding the GIL) is ended by the hard
    time limit (``hard_time_limit_seconds``, set when the worker starts): Celery kills the
    pool process and starts another; the step's lease then expires and the sweeper recovers
    it by the ledger rules (a call whose outcome is unknown is not repeated).
    """

    def after_return(self, *args: Any, **kwargs: Any) -> None:
        if self.request.is_eager or not runaway_tool_threads():
            return
        if runaway_tool_threads(wait=settings.AGENTOPS_RUNAWAY_GRACE_SECONDS) == 0:
            return
        if leave_pool_after_this_task():
            logger.warning(
                "a tool overran its timeout and still runs: replacing pool process %s",
                current_process().pid,
            )
        else:
            logger.warning("a tool overran its timeout and still runs in this process")


@worker_init.connect
def set_hard_time_limits(**kwargs: Any) -> None:
    """When a worker starts, its tools registered: give the tasks that execute steps their
    hard time limit (``hard_time_limit_seconds``), read by the worker as it starts
    consuming."""
    limit = hard_time_limit_seconds()
    for task in (advance_run, execute_step, retry_step):
        task.time_limit = limit


@shared_task(name="runs.advance_run", base=StepTask)
def advance_run(run_id: str) -> None:
    """Start or move on the run ``run_id`` (UUID text), executing the step it queues."""
    entry.run_advance(run_id=run_id, actor=Actor.worker(), execute=True)


@shared_task(name="runs.execute_step", base=StepTask)
def execute_step(step_id: int) -> None:
    """Claim and execute the queued step ``step_id``."""
    entry.step_execute(step_id=step_id, actor=Actor.worker())


@shared_task(name="runs.retry_step", base=StepTask)
def retry_step(step_id: int) -> None:
    """Queue the step ``step_id`` waiting to retry, then execute it."""
    actor = Actor.worker()
    if entry.step_retry_due(step_id=step_id, actor=actor):
        entry.step_execute(step_id=step_id, actor=actor)


@shared_task(name="runs.compact_run", base=DatabaseTask)
def compact_run(run_id: str) -> None:
    """Compact the run ``run_id`` (UUID text) if its context is still past the threshold."""
    compaction.run_compact_over_threshold(
        actor=Actor.system("compaction"), run_id=uuid.UUID(run_id)
    )


@shared_task(name="runs.compact_session", base=DatabaseTask)
def compact_session(session_id: str) -> None:
    """Compact the session ``session_id`` (UUID text) if its context is still past the
    threshold."""
    sessions.session_compact_over_threshold(
        actor=Actor.system("compaction"), session_id=uuid.UUID(session_id)
    )


@shared_task(name="runs.sweep", base=DatabaseTask)
def sweep() -> dict[str, int]:
    """Periodic recovery of lost wake-ups, expired approvals and runs past deadline."""
    return recovery.sweep(actor=Actor.system("sweeper"))


@shared_task(name="runs.retention_purge", base=DatabaseTask)
def retention_purge() -> int | None:
    """Periodic retention: a purge of every enabled policy and the expired audit chains
    (``runs.purges``), executed here; skipped while another purge is queued or running.
    Returns the purge's id (None when skipped)."""
    actor = Actor.system("retention")
    try:
        purge = purges.purge_start(actor=actor)
    except Conflict:
        logger.info("retention: another purge is queued or running, skipped")
        return None
    purges.purge_execute(purge_id=purge.pk, actor=actor)
    return purge.pk


@shared_task(name="runs.retention_purge_execute", base=DatabaseTask)
def retention_purge_execute(purge_id: int) -> None:
    """Execute the queued purge ``purge_id`` (one started from admin)."""
    purges.purge_execute(purge_id=purge_id, actor=Actor.system("retention"))


class CeleryWakeups:
    """Sends the executor's wake-ups (``runs.wakeups``) as these tasks; installed by
    ``RunsConfig.ready``. While the broker cannot be reached they are dropped (the sweeper
    sends them again): ``agentops.celery.send_or_drop``."""

    def execute_step(self, step_id: int) -> None:
        send_or_drop(execute_step, (step_id,))

    def advance_run(self, run_id: uuid.UUID) -> None:
        send_or_drop(advance_run, (str(run_id),))

    def retry_step(self, step_id: int, delay: float) -> None:
        send_or_drop(retry_step, (step_id,), countdown=delay)

    def compact_run(self, run_id: uuid.UUID) -> None:
        send_or_drop(compact_run, (str(run_id),))

    def compact_session(self, session_id: uuid.UUID) -> None:
        send_or_drop(compact_session, (str(session_id),))
