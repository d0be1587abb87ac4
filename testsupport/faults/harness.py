"""The fault-injection harness: real processes, random crashes, and the invariants they must keep.

``run_harness`` starts a ``testsupport.cluster.Cluster`` (its own ``redis-server``, two
``celery -A agentops worker --concurrency=2 -I testsupport.faults.tools`` processes and
``celery beat`` sweeping every second) on the database the calling process uses. It creates
the workload (``workload``) in a child process, so that the runs' start messages go to the
cluster's Redis, then, while it executes, injects faults (``injector``) at random moments
spread over the workload's progress:

- ``kill_child``: SIGKILL of a worker's pool process, most often one holding a running step;
- ``kill_parent``: SIGKILL of a worker's main process and its pool (a crashed host); a
  replacement worker is started, as a supervisor would;
- ``redis_restart``: SIGKILL of Redis and a restart on the same port, empty: every queued
  message is gone and only the sweeper, reading the database, can recover the work;
- ``pg_terminate``: ``pg_terminate_backend`` of every other client connection to the database.

Steps of the hang tool also time out on purpose. Once every fault is injected, the harness
waits until every run is terminal, stops the processes and checks the invariants
(``invariants.check_invariants``) against the workload's own plan, rebuilt from its seed, and
the side effects the independent ``recorder`` saw: every run succeeds except one that stops
at a call of the non-idempotent tool whose outcome is unknown (counted); no call of that tool
takes effect twice; no step is lost and no run stuck; the audit chains verify. It returns the
figures and the failed invariants as a ``Report``.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from testsupport.cluster import Cluster
from testsupport.database import django_database_url
from testsupport.faults import recorder
from testsupport.faults.injector import FaultInjector
from testsupport.faults.invariants import Report, check_invariants
from testsupport.faults.plan import FaultPlan
from testsupport.faults.workload import open_runs, plan_workload

__all__ = ["FaultPlan", "Report", "run_harness"]

WORKERS = 2
WORKER_CONCURRENCY = 2
# The longest lease a step of the workload can hold: the effect tools' 3 s timeout + margin.
LONGEST_TOOL_TIMEOUT_SECONDS = 3


def child_env(plan: FaultPlan, *, database: str) -> dict[str, str]:
    """Environment of every child process: the database, short leases, a sweeper every
    second, quick retries (the cluster adds its Redis)."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database,
        AGENTOPS_LEASE_MARGIN_SECONDS=str(plan.lease_margin_seconds),
        AGENTOPS_REQUEUE_AFTER_SECONDS=str(plan.requeue_after_seconds),
        AGENTOPS_SWEEP_INTERVAL_SECONDS="1",
        AGENTOPS_RETRY_BASE_SECONDS="1",
        AGENTOPS_RETRY_MAX_SECONDS="4",
        AGENTOPS_FAST_PASSWORD_HASHING="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_harness(plan: FaultPlan, *, workdir: Path) -> Report:
    """Run the whole harness on the database of Django's default connection.

    That database must be migrated and hold no runs (``check_invariants`` looks at every run);
    logs of every process go to ``workdir``. The figures include the wall time (s) from the
    creation of the first run until every run was terminal (or the wait gave up).

    Raises:
        RuntimeError: a process did not start, or creating the workload failed.
    """
    rng = random.Random(plan.seed)
    database = django_database_url()
    recorder.reset(database)
    env = child_env(plan, database=database)
    with Cluster(
        env,
        workdir=workdir,
        workers=WORKERS,
        concurrency=WORKER_CONCURRENCY,
        include="testsupport.faults.tools",
    ) as cluster:
        injector = FaultInjector(cluster, plan, rng)
        started = time.monotonic()
        cluster.run_child(
            "workload",
            "from testsupport.faults.workload import create_workload; "
            f"create_workload(runs={plan.runs}, steps={plan.steps}, seed={plan.seed}, "
            f"hang_share={plan.hang_share})",
        )
        injector.run()
        wait = LONGEST_TOOL_TIMEOUT_SECONDS + plan.lease_margin_seconds + plan.settle_seconds
        deadline = time.monotonic() + wait
        while open_runs() and time.monotonic() < deadline:
            cluster.supervise()
            time.sleep(0.2)
        wall = time.monotonic() - started
        faults = injector.counts
        for kind, n in cluster.unexpected_exits.items():
            faults[f"unexpected_{kind}"] = n
    expected = plan_workload(
        runs=plan.runs, steps=plan.steps, seed=plan.seed, hang_share=plan.hang_share
    )
    report = check_invariants(
        faults=faults,
        kill_times=injector.kill_times,
        expected_plan=expected,
        database_url=database,
    )
    report.figures["wall time (s)"] = round(wall, 1)
    return report
