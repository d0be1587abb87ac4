"""What every benchmark shares besides its figures (``table``) and data (``data``): paced sends,
the bare-Celery baseline's latencies, the processes under test (Celery workers, daphne, DBOS
workers) and PostgreSQL counters.

A benchmark module (``bench_*.py``) has ``NAME``, ``FIGURES`` (the rows it reports), ``SIZES``
(its parameters for ``tiny`` and ``full``) and ``run(bench) -> Iterator[Sample]``, which repeats
its measurement ``bench.repeat`` times and yields one sample per figure and repetition, each
with the baseline measured in the same repetition (``table.Figure``, ``table.Sample``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from testsupport.database import recreate_database
from testsupport.processes import (
    ROOT,
    Process,
    celery_worker_command,
    daphne_command,
    wait_until,
)

# ---------------------------------------------------------------------------------------------
# Paced sends and the bare-Celery baseline


def paced(count: int, interval: float) -> Iterator[int]:
    """Yield 0 .. ``count``-1, the i-th at ``i * interval`` seconds after the first: a fixed
    (open-loop) schedule that does not wait for what the caller does with each."""
    began = time.monotonic()
    for i in range(count):
        delay = began + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield i


def chain_latencies(bench: Bench, chains: int, links: int, interval: float) -> list[float]:
    """The bare-Celery baseline of a dispatch: send ``chains`` chains of ``links`` no-op links,
    one chain every ``interval`` seconds, and return every hop's latency in ms (a link's start
    - the time its predecessor sent it; for the first link, the time this process sent it).
    Hops of links after the first when ``links`` > 1, else the first links'."""
    from benchmarks.tasks import noop, results

    key = f"{bench.queue}:paced:{time.time_ns()}"
    for _ in paced(chains, interval):
        noop.delay(key, 0, links, time.time(), True)
    redis = results()
    wait_until(lambda: redis.llen(f"{key}:done") >= chains, 60 + chains * links, "bare chains")
    hops = [item.split() for item in redis.lrange(f"{key}:latency", 0, -1)]
    redis.delete(f"{key}:done", f"{key}:latency")
    first = 1 if links > 1 else 0
    return [float(latency) * 1000 for link, latency in hops if int(link) >= first]


# ---------------------------------------------------------------------------------------------
# The database and the processes under test


@dataclass
class Bench:
    """One invocation of the suite: where it runs, how big, how often, and its processes.

    ``server`` is ``postgres://user@host:port``, ``database`` the benchmark's own database,
    ``redis_url`` the Redis database of the broker and channel layer, ``queue`` the Celery queue
    of its workers (and the DBOS queue of the DBOS baseline's workers, in the DBOS system
    database ``<database>_dbos``); ``size`` is tiny or full; ``repeat`` how many times each
    benchmark measures; ``shared`` carries samples from one benchmark to the next
    (``steps_per_s_2``).
    """

    server: str
    database: str
    redis_url: str
    queue: str
    size: str
    repeat: int
    logs: Path
    seed: int = 1
    web_processes: int = 2
    shared: dict[str, list[float]] = field(default_factory=dict)
    workers: list[Process] = field(default_factory=list)
    daphne: list[Process] = field(default_factory=list)
    dbos_workers: list[Process] = field(default_factory=list)
    daphne_port: int = 0
    listener: socket.socket | None = None

    @property
    def database_url(self) -> str:
        """The benchmark database, as its own role (see ``recreate_database``)."""
        host = self.server.rpartition("@")[2]
        return f"postgres://{self.database}@{host}/{self.database}"

    def env(self) -> dict[str, str]:
        """The environment of every process of the benchmark, this one included."""
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": self.database_url,
                "REDIS_URL": self.redis_url,
                "CHANNELS_PREFIX": self.queue,
                "AGENTOPS_BENCH_QUEUE": self.queue,
                "CELERY_TASK_ALWAYS_EAGER": "0",
                "AGENTOPS_FAST_PASSWORD_HASHING": "1",
                "DEBUG": "0",
                "SECRET_KEY": "benchmark-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
                "AGENTOPS_AUDIT_KEY": "benchmark-only-audit-key-0123456789-abcdefghijklmnopqrstuv",
                "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
                "SECURE_SSL_REDIRECT": "0",
                "SECURE_HSTS_SECONDS": "0",
                "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
                "LOG_LEVEL": "WARNING",
                # The bare-chain baseline must stay a bare Celery chain: no task-history row
                # (a commit) per hop. Failures are still recorded.
                "AGENTOPS_TASK_HISTORY": "failures",
                "PYTHONUNBUFFERED": "1",
                "DJANGO_SETTINGS_MODULE": "agentops.settings",
            }
        )
        return env

    def migrate(self) -> None:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--verbosity=0"],
            cwd=ROOT,
            env=self.env(),
            check=True,
        )

    # Workers ---------------------------------------------------------------------------------

    def start_workers(self, count: int) -> None:
        """Run exactly ``count`` Celery worker processes (``--concurrency=1`` each), starting or
        stopping them as needed, and return once every one answers a ping."""
        if len(self.workers) == count:
            return
        self.stop_workers()
        from agentops.celery import app

        names = [f"{self.queue}-{i}@{socket.gethostname()}" for i in range(count)]
        for i, name in enumerate(names):
            cmd = celery_worker_command(
                hostname=name,
                concurrency=1,
                include="benchmarks.tasks",
                queue=self.queue,
                purge=i == 0,
                loglevel="WARNING",
            )
            self.workers.append(Process(cmd, self.env(), self.logs / f"worker-{i}.log"))
        for name, worker in zip(names, self.workers, strict=True):

            def answers(name: str = name) -> bool:
                return bool(app.control.ping(destination=[name], timeout=0.5))

            worker.wait_until(answers, f"celery worker {name}")

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []

    # daphne ----------------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.daphne_port}"

    def start_daphne(self) -> None:
        """Serve the project (HTTP and WebSocket) with ``web_processes`` daphne processes
        sharing one listening socket on a free port (``daphne --fd``), so that the kernel
        spreads connections over them: one Python process can use one core only."""
        if self.daphne:
            return
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.daphne_port = int(self.listener.getsockname()[1])
        fd = self.listener.fileno()
        # The project's application, with the benchmark's Celery queue (benchmarks/asgi.py).
        cmd = daphne_command(fd=fd, application="benchmarks.asgi:application")
        env = {**self.env(), "AGENTOPS_DB_POOL": "1"}  # as web processes run (scripts/start)
        logs = [self.logs / f"daphne-{i}.log" for i in range(self.web_processes)]
        # A process's log is appended to across restarts: only what this one wrote counts.
        offsets = [_log_size(log) for log in logs]
        for log in logs:
            self.daphne.append(Process(cmd, env, log, pass_fds=(fd,)))

        def serving(process: Process, offset: int) -> bool:
            # Ask the shared socket until this process has answered a request (its access log
            # shows one): the kernel hands each connection to one of the accepting processes.
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.http_url}/accounts/login/", timeout=2).close()  # noqa: S310 (our own server)
            return b'"GET /accounts/login/" 200' in process.log.read_bytes()[offset:]

        for process, offset in zip(self.daphne, offsets, strict=True):
            process.wait_until(functools.partial(serving, process, offset), "daphne")

    def stop_daphne(self) -> None:
        for process in self.daphne:
            process.stop()
        self.daphne = []
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    # DBOS workers ------------------------------------------------------------------------------

    @property
    def dbos_database(self) -> str:
        """The DBOS baseline's system database (and its role), next to ``database``."""
        return f"{self.database}_dbos"

    @property
    def dbos_url(self) -> str:
        """The DBOS system database, as its own role (SQLAlchemy's ``postgresql://`` form)."""
        host = self.server.rpartition("@")[2]
        return f"postgresql://{self.dbos_database}@{host}/{self.dbos_database}"

    def recreate_dbos_database(self) -> None:
        """Drop and re-create the DBOS system database (as ``recreate_database`` does the
        benchmark's) and create DBOS's schema in it (``DBOS.migrate``)."""
        from dbos import DBOS

        recreate_database(self.server, self.dbos_database)
        DBOS.migrate(self.dbos_url)

    def start_dbos_workers(self, count: int) -> None:
        """Run exactly ``count`` DBOS worker processes (``benchmarks/dbos_worker.py``, DBOS
        executors ``<queue>-<i>``), starting or stopping them as needed, and return once every
        one polls the DBOS queue ``queue`` (registered by the caller beforehand)."""
        from benchmarks.dbos_worker import READY_LINE

        if len(self.dbos_workers) == count:
            return
        self.stop_dbos_workers()
        logs = [self.logs / f"dbos-worker-{i}.log" for i in range(count)]
        offsets = [_log_size(log) for log in logs]
        for i, log in enumerate(logs):
            cmd = [sys.executable, "-m", "benchmarks.dbos_worker"]
            cmd += ["--system-database", self.dbos_url, "--queue", self.queue]
            cmd += ["--executor", f"{self.queue}-{i}"]
            self.dbos_workers.append(Process(cmd, self.env(), log, name=f"dbos worker {i}"))
        for i, (worker, offset) in enumerate(zip(self.dbos_workers, offsets, strict=True)):

            def ready(worker: Process = worker, offset: int = offset) -> bool:
                return READY_LINE.encode() in worker.log.read_bytes()[offset:]

            worker.wait_until(ready, f"dbos worker {i}")

    def stop_dbos_workers(self) -> None:
        for worker in self.dbos_workers:
            worker.stop()
        self.dbos_workers = []

    def stop_all(self) -> None:
        self.stop_workers()
        self.stop_dbos_workers()
        self.stop_daphne()

    # PostgreSQL counters ---------------------------------------------------------------------

    def xact_commits(self) -> int:
        """``pg_stat_database.xact_commit`` of the benchmark's database, once every connection
        to it has ended (a backend's counters are flushed at the latest when it exits).

        The caller stops the workers and closes this process's connections first; the counter
        is read through the ``postgres`` database, so reading it adds no commit.
        """
        # Client connections only: an autovacuum worker may stay on the database a while.
        wait_until(
            lambda: not self.backend_pids(), 30, "connections to the benchmark database to end"
        )
        time.sleep(0.2)
        with psycopg.connect(f"{self.server}/postgres", autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [self.database]
            ).fetchone()
        assert row is not None
        return int(row[0])

    def backend_pids(
        self, *, excluding: int | None = None, database: str | None = None
    ) -> list[int]:
        """The process ids of the client backends connected now to ``database`` (the
        benchmark's by default; ``dbos_database`` for the DBOS baseline's), but ``excluding``
        (this process's own backend, say)."""
        with psycopg.connect(f"{self.server}/postgres", autocommit=True) as conn:
            found = conn.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = %s AND backend_type = 'client backend'",
                [database or self.database],
            ).fetchall()
        return [pid for (pid,) in found if pid != excluding]


def _log_size(log: Path) -> int:
    """The size of ``log`` in bytes, 0 when it does not exist yet."""
    return log.stat().st_size if log.exists() else 0
