"""A private Redis and a cluster of Celery workers and beat, for tests and harnesses that
crash them on purpose."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import redis

from testsupport.processes import (
    ROOT,
    Process,
    celery_beat_command,
    celery_worker_command,
    free_port,
)


class RedisServer:
    """A ``redis-server`` without persistence on a free port: a restart starts it empty."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.process: Process | None = None
        self.start()

    def start(self) -> None:
        """Start the server and wait until it answers PING (at most 10 s).

        Raises:
            RuntimeError: it did not answer.
        """
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        cmd += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        self.process = Process(cmd, dict(os.environ), self.workdir / "redis.log", name="redis")
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        self.process.wait_until(answers, f"redis-server on port {self.port}", timeout=10)

    def crash(self) -> None:
        """SIGKILL the server: every message it held is lost."""
        if self.process is not None:
            self.process.crash()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(5)


class Cluster:
    """``workers`` Celery workers of ``concurrency`` pool processes each (loading the module
    ``include``) and Celery beat, on a private Redis, with ``env`` (the database and settings)
    for every process; a context manager that stops every process it started on exit."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        workdir: Path,
        workers: int = 2,
        concurrency: int = 2,
        include: str = "",
    ):
        self.workdir = workdir
        self.count = workers
        self.concurrency = concurrency
        self.include = include
        self.redis = RedisServer(workdir)
        self.env = {**env, "REDIS_URL": self.redis.url, "CELERY_TASK_ALWAYS_EAGER": "0"}
        self.started = 0
        self.workers: list[Process] = []
        self.beat: Process | None = None
        self.unexpected_exits: Counter[str] = Counter()

    def __enter__(self) -> Cluster:
        try:
            self.workers = [self.start_worker() for _ in range(self.count)]
            self.beat = self._start_beat()
            for worker in self.workers:
                worker.wait_for_log("ready.", worker.name)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_worker(self) -> Process:
        """Start one more worker process (without waiting for it to be ready)."""
        self.started += 1
        name = f"worker{self.started}"
        cmd = celery_worker_command(
            hostname=f"cluster-{name}-{os.getpid()}@%h",
            concurrency=self.concurrency,
            include=self.include,
        )
        return Process(cmd, self.env, self.workdir / f"{name}.log", name=name)

    def _start_beat(self) -> Process:
        cmd = celery_beat_command(schedule=self.workdir / "beat-schedule")
        return Process(cmd, self.env, self.workdir / "beat.log", name="beat")

    def supervise(self) -> None:
        """Restart a worker or beat that exited on its own (nobody killed it on purpose), as
        a process supervisor would, and count it in ``unexpected_exits``."""
        for i, worker in enumerate(self.workers):
            if not worker.alive:
                self.unexpected_exits["worker"] += 1
                worker.stop(1)
                self.workers[i] = self.start_worker()
        if self.beat is not None and not self.beat.alive:
            self.unexpected_exits["beat"] += 1
            self.beat = self._start_beat()

    def run_child(self, name: str, code: str, timeout: float = 600.0) -> None:
        """Run ``manage.py shell -c code`` with the cluster's environment.

        Raises:
            RuntimeError: it failed.
        """
        log = self.workdir / f"{name}.log"
        cmd = [sys.executable, "manage.py", "shell", "-c", code]
        with log.open("ab") as out:
            done = subprocess.run(
                cmd, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
            )
        if done.returncode:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} failed:\n{tail}")

    def close(self) -> None:
        for worker in self.workers:
            worker.stop(15)
        if self.beat is not None:
            self.beat.stop(5)
        self.redis.stop()
