"""Step throughput: no-op steps per second end to end, with 1 and 2 worker processes, against a
bare Celery chain of no-op tasks with the same settings and against DBOS workflows of no-op
steps on the same PostgreSQL server; commits and SQL statements per step.

A no-op step is an ``echo`` step of a plan run (low risk, no approval): claimed, executed,
its result, transition, audit event and checkpoint committed, the run advanced and the next
step claimed. ``runs`` runs of ``steps`` steps are created at once over the REST API
(``POST /api/v1/runs/``, an operator's API token, ``CREATE_CONNECTIONS`` requests at a time)
through the daphne processes, so the workers always have work; throughput is the steps
completed over the time from just before the first request to the last run's ``finished_at``.
The bare-chain baseline sends as many chains of as many ``benchmarks.noop`` links, each link
enqueueing the next, to the same workers. The DBOS baseline enqueues as many DBOS workflows of
as many ``@DBOS.step()`` no-ops (``benchmarks/dbos_worker.py``) on a DBOS queue from this
process (``DBOSClient``) for as many DBOS worker processes, each running one workflow at a
time; its throughput is the steps over the time from just before the first enqueue to the
last workflow's ``completed_at`` (DBOS's system database).

Commits per step: the delta of ``pg_stat_database.xact_commit`` of the benchmark database
over the run (workers and daphne stopped before reading, so their counters are flushed), minus
this process's own transactions (polling), divided by the steps; it includes daphne's: its
start and the creation requests. The executor's own costs per step are measured in-process,
with eager tasks, as the difference between a run of ``2 * steps`` steps and one of ``steps``
steps (creation included in both), over ``steps``: SQL statements (``CaptureQueriesContext``),
and round trips and COMMITs as libpq's protocol trace records them
(``testsupport.roundtrips``; ``pg_stat_statements`` is not loaded on this server).

What the creation costs the window, for each worker count: the share of the window spent
until the last creation request was answered (daphne's creation shares the 2 cores with the
workers meanwhile), and the steps/s from then to the last run's end (steps whose
``finished_at`` is later, over that time), as the workers run once no run is being created.

Where the machine's CPU goes, for each worker count: the CPU time (``/proc``, user + system)
of the worker processes (each with its pool process), of the PostgreSQL backends of the
benchmark database (this process's own excluded) and of the daphne processes, from just before
the first creation request to the last run's end, per step completed, in ms. With two workers
the 2 cores are the bound, so these show what a step costs the machine, all processes told.
The same for DBOS (``dbos_steps_per_second``): its worker processes, the backends of its
system database, and its client enqueueing the workflows; the totals of both, side by side,
say how much more of the machine an agentops step takes than a DBOS step.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target
from testsupport.processes import cpu_seconds, wait_until

NAME = "throughput"


@dataclass(frozen=True)
class Size:
    runs: int
    steps: int
    worker_counts: tuple[int, ...]


SIZES = {"tiny": Size(runs=3, steps=3, worker_counts=(1, 2)), "full": Size(40, 25, (1, 2))}

FIGURES = [
    Figure("steps_1", "no-op steps/s, 1 worker (baseline: bare chain)", "steps/s",
           (Target(">=", 0.5, "ratio"),)),
    Figure("steps_2", "no-op steps/s, 2 workers (baseline: bare chain)", "steps/s",
           (Target(">=", 300), Target(">=", 0.5, "ratio"))),
    Figure("vs_dbos_1", "agentops / DBOS, 1 worker (baseline: DBOS steps/s)", "steps/s",
           (Target(">=", 1.0, "ratio"),)),
    Figure("vs_dbos_2", "agentops / DBOS, 2 workers (baseline: DBOS steps/s)", "steps/s",
           (Target(">=", 1.0, "ratio"),)),
    Figure("dbos_1", "DBOS no-op steps/s, 1 worker (baseline: bare chain)", "steps/s"),
    Figure("dbos_2", "DBOS no-op steps/s, 2 workers (baseline: bare chain)", "steps/s"),
    Figure("commits", "PostgreSQL commits per step (REST creation included)", "commits",
           (Target("<", 3),)),
    Figure("statements", "SQL statements per step (in-process run)", "statements"),
    Figure("round_trips", "SQL round trips per step (in-process run, libpq trace)", "round trips",
           (Target("<=", 6),)),
    Figure("step_commits", "commits per step (in-process run, libpq trace)", "commits",
           (Target("<=", 1.1),)),
    *(
        figure
        for n in (1, 2)
        for figure in (
            Figure(f"creating_{n}", f"share of the window creating the runs, {n} worker"
                   f"{'s' if n > 1 else ''}", "%"),
            Figure(f"after_{n}", f"no-op steps/s once every run was created, {n} worker"
                   f"{'s' if n > 1 else ''}", "steps/s"),
        )
    ),
    *(
        Figure(f"cpu_{part}_{n}", f"CPU a step, {n} worker{'s' if n > 1 else ''}: {what}", "ms")
        for n in (1, 2)
        for part, what in (
            ("workers", "worker processes"),
            ("postgres", "PostgreSQL backends"),
            ("daphne", "daphne (creating the runs)"),
            ("total", "all three (baseline: DBOS's)"),
            ("dbos_workers", "DBOS worker processes"),
            ("dbos_postgres", "PostgreSQL backends of DBOS"),
            ("dbos_client", "DBOS client (enqueueing the workflows)"),
        )
    ),
]  # fmt: skip

STEP = {"tool": "echo", "args": {"value": 1}}
# Creation requests in flight at once: two per daphne process (the default one per core), so
# each has one request to serve while the client reads the other's answer.
CREATE_CONNECTIONS = 4
# How often a DBOS worker polls its queue for a workflow (DBOS's default is 1 s). A worker
# running one workflow at a time only looks for the next one when it polls, so at the default
# it waits half a second on average between workflows (about 50 steps/s with 2 workers on the
# development machine); 1 ms to 50 ms were tried there and 5 to 20 ms did best, within the
# noise of each other (more often costs the polling's own queries).
DBOS_POLLING_SECONDS = 0.01


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


@functools.cache
def operator_token() -> str:
    """An API token of the default project's operator (created once per process)."""
    return str(bench_users()["operator_token"])


async def post_runs(base_url: str, token: str, count: int, steps: int) -> list[str]:
    """Create ``count`` plan runs of ``steps`` no-op steps with ``POST /api/v1/runs/`` at
    ``base_url``, ``CREATE_CONNECTIONS`` requests at a time; returns their ids (UUID text).

    Raises:
        RuntimeError: a request was not answered 201 (with its status and body).
    """
    headers = {"Authorization": f"Token {token}"}
    connector = aiohttp.TCPConnector(limit=CREATE_CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(
        base_url, headers=headers, connector=connector, timeout=timeout
    ) as session:

        async def create(i: int) -> str:
            body = {"agent": "plan", "goal": f"bench {i}", "steps": [STEP] * steps}
            async with session.post("/api/v1/runs/", json=body) as response:
                if response.status != 201:
                    text = await response.text()
                    raise RuntimeError(f"POST /api/v1/runs/: {response.status} {text[:500]}")
                return str((await response.json())["id"])

        return list(await asyncio.gather(*(create(i) for i in range(count))))


@dataclass(frozen=True)
class Measured:
    """One measurement of agentops: steps/s, commits a step, the share of the window spent
    creating the runs (%) and the steps/s after it (``creation_split``), and the CPU a step
    (ms) of the worker processes, the PostgreSQL backends and daphne."""

    steps_per_s: float
    commits: float
    creating: float
    after: float
    cpu: dict[str, float]


def creation_split(
    began: float, created: float, finished: float, steps_after: int
) -> tuple[float, float]:
    """(share of the window ``began`` → ``finished`` spent until ``created``, in %; steps/s
    from ``created`` to ``finished`` for the ``steps_after`` steps that finished after
    ``created``); times in seconds. No time left after the creation gives (100, 0)."""
    if finished <= created:
        return 100.0, 0.0
    return 100 * (created - began) / (finished - began), steps_after / (finished - created)


def _cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """Seconds of CPU used between two readings of ``cpu_seconds`` (a process first seen in
    ``after`` counts in full)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def app_steps_per_second(bench: Bench, size: Size) -> Measured:
    """Create ``size.runs`` runs over the REST API for the running workers; returns steps/s,
    commits per step and the CPU a step of each kind of process.

    Starts daphne after reading the commit counter and stops it and the workers before
    reading it again (their counters are flushed when their connections end): the caller
    starts the workers again.
    """
    from datetime import UTC, datetime

    from django.db import connection
    from django.db.models import Max

    from runs.models import Run, Step

    token = operator_token()
    bench.stop_daphne()
    connection.close()
    before = bench.xact_commits()
    bench.start_daphne()
    own = OwnTransactions()
    workers = [worker.proc.pid for worker in bench.workers]
    daphne = [process.proc.pid for process in bench.daphne]
    cpu_before = {
        "workers": cpu_seconds(workers),
        "postgres": cpu_seconds(bench.backend_pids()),
        "daphne": cpu_seconds(daphne),
    }
    with connection.execute_wrapper(own):
        began = time.time()
        ids = asyncio.run(post_runs(bench.http_url, token, size.runs, size.steps))
        created = time.time()
        wait_runs(ids, "succeeded", timeout=120 + size.runs * size.steps / 5)
        finished = Run.objects.filter(pk__in=ids).aggregate(last=Max("finished_at"))["last"]
        steps_after = Step.objects.filter(
            run_id__in=ids, finished_at__gt=datetime.fromtimestamp(created, UTC)
        ).count()
        mine = connection.connection.info.backend_pid if connection.connection else None
    cpu_after = {
        "workers": cpu_seconds(workers),
        "postgres": cpu_seconds(bench.backend_pids(excluding=mine)),
        "daphne": cpu_seconds(daphne),
    }
    bench.stop_workers()
    bench.stop_daphne()
    connection.close()
    commits = bench.xact_commits() - before - own.total
    steps = size.runs * size.steps
    cpu = {part: 1000 / steps * _cpu_used(cpu_before[part], cpu_after[part]) for part in cpu_after}
    creating, after = creation_split(began, created, finished.timestamp(), steps_after)
    return Measured(steps / (finished.timestamp() - began), commits / steps, creating, after, cpu)


def dbos_client(bench: Bench) -> Any:
    """A ``DBOSClient`` of the DBOS baseline's application on its system database, with its
    queue (named ``bench.queue``: one workflow at a time per worker process) registered."""
    from dbos import DBOSClient

    from benchmarks.dbos_worker import APP_NAME

    client = DBOSClient(system_database_url=bench.dbos_url, application_name=APP_NAME)
    client.register_queue(
        bench.queue,
        worker_concurrency=1,
        polling_interval_sec=DBOS_POLLING_SECONDS,
        application_name=APP_NAME,
    )
    return client


def dbos_steps_per_second(
    bench: Bench, client: Any, workflows: int, steps: int
) -> tuple[float, dict[str, float]]:
    """Enqueue ``workflows`` DBOS workflows of ``steps`` no-op steps for the running DBOS
    workers; returns steps/s (to the last workflow's ``completed_at``, DBOS's database clock)
    and the CPU a step (ms) of the DBOS worker processes (``dbos_workers``), of the PostgreSQL
    backends of DBOS's system database (``dbos_postgres``: the workers', and the client's,
    which enqueue and poll; polling every 0.1 s costs about as little as this process's own
    polling, left out of agentops's figure) and of this process while it enqueues
    (``dbos_client``), from just before the first enqueue to the last workflow's end.

    Raises:
        RuntimeError: a workflow did not succeed, or did not run its ``steps`` steps.
        TimeoutError: they were not all done in time.
    """
    from benchmarks.dbos_worker import APP_VERSION, WORKFLOW

    options = {"queue_name": bench.queue, "workflow_name": WORKFLOW, "app_version": APP_VERSION}
    workers = [worker.proc.pid for worker in bench.dbos_workers]
    backends = bench.backend_pids(database=bench.dbos_database)
    cpu_before = {
        "dbos_workers": cpu_seconds(workers),
        "dbos_postgres": cpu_seconds(backends),
    }
    began, client_began = time.time(), time.process_time()
    ids = [client.enqueue(options, steps).get_workflow_id() for _ in range(workflows)]
    client_cpu = time.process_time() - client_began

    def done() -> list[Any] | None:
        found = client.list_workflows(workflow_ids=ids, load_input=False)
        statuses = {w.status for w in found}
        if statuses - {"ENQUEUED", "PENDING", "SUCCESS"}:
            raise RuntimeError(f"DBOS workflows ended {statuses}")
        return found if len(found) == len(ids) and statuses == {"SUCCESS"} else None

    found = wait_until(done, 120 + workflows * steps / 5, "DBOS workflows", interval=0.1)
    if {w.output for w in found} != {steps}:
        raise RuntimeError(f"DBOS workflows ran {sorted({w.output for w in found})} steps")
    cpu_after = {
        "dbos_workers": cpu_seconds(workers),
        # With the backends of connections opened meanwhile, which count in full.
        "dbos_postgres": cpu_seconds(bench.backend_pids(database=bench.dbos_database)),
    }
    finished = max(w.completed_at for w in found) / 1000
    total = workflows * steps
    cpu = {part: 1000 / total * _cpu_used(cpu_before[part], cpu_after[part]) for part in cpu_after}
    cpu["dbos_client"] = 1000 / total * client_cpu
    return total / (finished - began), cpu


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


def in_process_costs(steps: int) -> tuple[float, float, float]:
    """(SQL statements, round trips, COMMITs) per no-op step, executed in-process: the
    difference between a run of ``2 * steps`` steps and one of ``steps``, over ``steps``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentops.celery import app
    from runs.models import Run
    from testsupport.roundtrips import round_trips

    def one(count: int) -> tuple[int, int, int]:
        connection.ensure_connection()
        with CaptureQueriesContext(connection) as queries, round_trips(connection) as trips:
            (run_id,) = create_runs(1, count)
        status = Run.objects.get(pk=run_id).status
        if status != "succeeded":
            raise RuntimeError(f"in-process run ended {status}")
        return len(queries), trips.count, trips.commits

    app.conf.task_always_eager = True
    try:
        one(steps)  # warm: statements prepared, caches filled
        short, long = one(steps), one(2 * steps)
    finally:
        app.conf.task_always_eager = False
    statements, trips, commits = ((b - a) / steps for a, b in zip(short, long, strict=True))
    return statements, trips, commits


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    statements, trips, commits = in_process_costs(size.steps)
    yield Sample("statements", statements)
    yield Sample("round_trips", trips)
    yield Sample("step_commits", commits)
    bench.recreate_dbos_database()
    client = dbos_client(bench)
    try:
        for _ in range(bench.repeat):
            for workers in size.worker_counts:
                # Only the processes under test run while each is measured.
                bench.stop_dbos_workers()
                bench.stop_workers()
                bench.start_workers(workers)
                chain = chain_links_per_second(bench, size.runs, size.steps)
                measured = app_steps_per_second(bench, size)
                steps_per_s = measured.steps_per_s
                bench.start_dbos_workers(workers)
                dbos, dbos_cpu = dbos_steps_per_second(bench, client, size.runs, size.steps)
                bench.stop_dbos_workers()
                yield Sample(f"steps_{workers}", steps_per_s, chain)
                yield Sample(f"vs_dbos_{workers}", steps_per_s, dbos)
                yield Sample(f"dbos_{workers}", dbos, chain)
                yield Sample("commits", measured.commits)
                yield Sample(f"creating_{workers}", measured.creating)
                yield Sample(f"after_{workers}", measured.after)
                for part, ms in (measured.cpu | dbos_cpu).items():
                    yield Sample(f"cpu_{part}_{workers}", ms)
                yield Sample(
                    f"cpu_total_{workers}", sum(measured.cpu.values()), sum(dbos_cpu.values())
                )
                if workers == 2:
                    bench.shared.setdefault("steps_per_s_2", []).append(steps_per_s)
    finally:
        client.destroy()
