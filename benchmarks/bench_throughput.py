"""Step throughput: no-op steps per second end to end, with 1 and 2 worker processes, against a
bare Celery chain of no-op tasks with the same settings; commits and SQL statements per step.

A no-op step is an ``echo`` step of a plan run (low risk, no approval): claimed, executed,
its result, transition, audit event and checkpoint committed, the run advanced and the next
step enqueued. ``runs`` runs of ``steps`` steps are created at once from this process
(``runs.control.create.run_create``), so the workers always have work; throughput is the steps
completed over the time from the first creation to the last run's ``finished_at``. The
baseline sends as many chains of as many ``benchmarks.noop`` links, each link enqueueing the
next, to the same workers.

Commits per step: the delta of ``pg_stat_database.xact_commit`` of the benchmark database
over the run (workers stopped before reading, so their counters are flushed), minus this
process's own transactions (creating the runs, polling), divided by the steps. SQL statements
per step: every statement of one whole run of ``steps`` steps executed in-process with eager
tasks (``CaptureQueriesContext``), creation included, divided by its steps
(``pg_stat_statements`` is not loaded on this server).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import Bench, Figure, Sample, Target
from testsupport.processes import wait_until

NAME = "throughput"


@dataclass(frozen=True)
class Size:
    runs: int
    steps: int
    worker_counts: tuple[int, ...]


SIZES = {"tiny": Size(runs=3, steps=3, worker_counts=(1, 2)), "full": Size(30, 20, (1, 2))}

FIGURES = [
    Figure("steps_1", "no-op steps/s, 1 worker (baseline: bare chain)", "steps/s",
           (Target(">=", 0.5, "ratio"),)),
    Figure("steps_2", "no-op steps/s, 2 workers (baseline: bare chain)", "steps/s",
           (Target(">=", 300), Target(">=", 0.5, "ratio"))),
    Figure("commits", "PostgreSQL commits per step", "commits", (Target("<", 3),)),
    Figure("statements", "SQL statements per step (in-process run)", "statements"),
]  # fmt: skip

STEP = {"tool": "echo", "args": {"value": 1}}


class OwnTransactions:
    """Counts the transactions this process commits: statements run outside an atomic block
    (each is its own transaction) plus the atomic blocks the caller reports (``blocks``)."""

    def __init__(self) -> None:
        self.autocommit = 0
        self.blocks = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not context["connection"].in_atomic_block:
            self.autocommit += 1
        return execute(sql, params, many, context)

    @property
    def total(self) -> int:
        return self.autocommit + self.blocks


def create_runs(
    count: int,
    steps: int,
    own: OwnTransactions | None = None,
    step: dict[str, Any] = STEP,
) -> list[str]:
    """Create ``count`` plan runs of ``steps`` no-op steps (``step``, an echo by default);
    returns their ids (UUID text)."""
    from agentops.actors import Actor
    from runs.control.create import run_create

    actor = Actor.system("bench")
    ids = []
    for i in range(count):
        run = run_create(actor=actor, agent="plan", goal=f"bench {i}", steps=[step] * steps)
        ids.append(str(run.pk))
        if own is not None:
            own.blocks += 1
    return ids


def wait_runs(ids: list[str], status: str, timeout: float) -> None:
    """Wait until every run of ``ids`` has ``status``.

    Raises:
        RuntimeError: a run failed or was cancelled.
        TimeoutError: not within ``timeout`` seconds.
    """
    from runs.models import Run

    def done() -> bool:
        statuses = set(Run.objects.filter(pk__in=ids).values_list("status", flat=True).distinct())
        if statuses & {"failed", "cancelled"}:
            raise RuntimeError(f"benchmark runs ended {statuses}")
        return statuses == {status}

    wait_until(done, timeout, f"{len(ids)} runs {status}", interval=0.1)


def app_steps_per_second(bench: Bench, size: Size) -> tuple[float, float]:
    """Run ``size.runs`` runs on the running workers; returns (steps/s, commits per step).

    Stops the workers (to read their commit counters): the caller starts them again.
    """
    from django.db import connection
    from django.db.models import Max

    from runs.models import Run

    connection.close()
    before = bench.xact_commits()
    own = OwnTransactions()
    with connection.execute_wrapper(own):
        began = time.time()
        ids = create_runs(size.runs, size.steps, own)
        wait_runs(ids, "succeeded", timeout=120 + size.runs * size.steps / 5)
        finished = Run.objects.filter(pk__in=ids).aggregate(last=Max("finished_at"))["last"]
    bench.stop_workers()
    connection.close()
    commits = bench.xact_commits() - before - own.total
    steps = size.runs * size.steps
    return steps / (finished.timestamp() - began), commits / steps


def chain_links_per_second(bench: Bench, chains: int, links: int) -> float:
    """Send ``chains`` bare chains of ``links`` no-op links at once; returns links/s."""
    from benchmarks.tasks import noop, results

    key = f"{bench.queue}:chain:{uuid.uuid4().hex}"
    began = time.time()
    for _ in range(chains):
        noop.delay(key, 0, links, time.time(), False)
    redis = results()
    wait_until(lambda: redis.llen(f"{key}:done") >= chains, 120 + chains * links / 5, "bare chains")
    finished = max(float(x) for x in redis.lrange(f"{key}:done", 0, -1))
    redis.delete(f"{key}:done")
    return chains * links / (finished - began)


def statements_per_step(steps: int) -> float:
    """SQL statements of one run of ``steps`` no-op steps executed in-process, per step."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentops.celery import app
    from runs.models import Run

    app.conf.task_always_eager = True
    try:
        with CaptureQueriesContext(connection) as queries:
            (run_id,) = create_runs(1, steps)
    finally:
        app.conf.task_always_eager = False
    status = Run.objects.get(pk=run_id).status
    if status != "succeeded":
        raise RuntimeError(f"in-process run ended {status}")
    return len(queries) / steps


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    yield Sample("statements", statements_per_step(size.steps))
    for _ in range(bench.repeat):
        for workers in size.worker_counts:
            bench.stop_workers()
            bench.start_workers(workers)
            baseline = chain_links_per_second(bench, size.runs, size.steps)
            steps_per_s, commits = app_steps_per_second(bench, size)
            yield Sample(f"steps_{workers}", steps_per_s, baseline)
            yield Sample("commits", commits)
            if workers == 2:
                bench.shared.setdefault("steps_per_s_2", []).append(steps_per_s)
