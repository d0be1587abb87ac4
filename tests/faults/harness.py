"""The fault-injection harness: real processes, random crashes, and the invariants they must keep.

``run_harness`` starts its own ``redis-server`` on a free port, two ``celery -A agentops
worker --concurrency=2 -I tests.faults.tools`` processes and ``celery beat`` (sweeping every
second), all on the database the calling process uses. It creates plan runs through
``runs.control.create.run_create`` (in a child process, so that their start messages go to the
harness's Redis), then, while they execute, injects faults at random moments spread over the
workload's progress:

- ``kill_child``: SIGKILL of a worker's pool process, most often one holding a running step;
- ``kill_parent``: SIGKILL of a worker's main process and its pool (a crashed host); a
  replacement worker is started, as a supervisor would;
- ``redis_restart``: SIGKILL of Redis and a restart on the same port, empty: every queued
  message is gone and only the sweeper, reading the database, can recover the work;
- ``pg_terminate``: ``pg_terminate_backend`` of every other client connection to the database.

Steps of the hang tool also time out on purpose. Once every fault is injected, the harness
waits until every run is terminal, stops the processes and checks (``check_invariants``):
every run terminal; no step lost; no effect recorded twice for one idempotency key; one effect
for each succeeded effect step, at most one for the others; one audit event per transition;
every audit chain verifies; the ledger agrees with succeeded steps. It returns the figures and
the failed invariants as a ``Report``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from agentops.actors import Actor
from audit.models import AuditEvent
from audit.selectors import chain_verify, chains
from runs.models import (
    RUN_TERMINAL,
    STEP_TERMINAL,
    AttemptStatus,
    CallStatus,
    Run,
    RunStatus,
    Step,
    StepAttempt,
    StepStatus,
    ToolCall,
)
from tests.faults.tools import EFFECT, EFFECT_TOOLS, EFFECTS_TABLE, HANG, IDEMPOTENT_EFFECT

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2
WORKER_CONCURRENCY = 2
# The longest lease a step of the workload can hold: the effect tools' 3 s timeout + margin.
LONGEST_TOOL_TIMEOUT_SECONDS = 3
# Faults are spread over the first 85% of the workload's progress (share of settled steps),
# so the last ones still land while runs execute.
FAULT_SPAN = 0.85


@dataclass(frozen=True)
class FaultPlan:
    """The size of one harness run.

    ``runs`` plan runs of ``steps`` steps each; ``kills`` SIGKILLs of worker processes, of which
    one in ``parent_kill_every`` hits a worker's main process; ``redis_restarts`` and
    ``pg_terminations`` as described in the module docstring; ``hang_share`` the share of steps
    that call the hang tool; ``seed`` makes the workload and the fault schedule repeatable (the
    timing of processes is not). Lease margin and requeue age (seconds) are passed to the
    processes as ``AGENTOPS_LEASE_MARGIN_SECONDS`` and ``AGENTOPS_REQUEUE_AFTER_SECONDS``.
    """

    runs: int = 12
    steps: int = 4
    kills: int = 12
    redis_restarts: int = 1
    pg_terminations: int = 3
    seed: int = 1
    parent_kill_every: int = 6
    hang_share: float = 0.1
    lease_margin_seconds: int = 2
    requeue_after_seconds: int = 3
    settle_seconds: float = 60.0


@dataclass
class Report:
    """What a harness run measured (``figures``, in display order) and which invariants failed
    (``failures``, one line each; empty when all held)."""

    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def table(self) -> str:
        """The figures as a two-column text table, then the failed invariants."""
        width = max(len(name) for name in self.figures)
        lines = [f"{name:<{width}}  {value}" for name, value in self.figures.items()]
        lines.append("")
        lines.append("invariants: " + ("all hold" if self.ok else "FAILED"))
        lines += [f"  - {failure}" for failure in self.failures]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Processes


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def database_url() -> str:
    """The ``DATABASE_URL`` of the database Django's default connection uses (for children)."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def child_env(plan: FaultPlan, *, database: str, redis_url: str) -> dict[str, str]:
    """Environment of every child process: the database and Redis, short leases, a sweeper
    every second, quick retries."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database,
        REDIS_URL=redis_url,
        CELERY_TASK_ALWAYS_EAGER="0",
        AGENTOPS_LEASE_MARGIN_SECONDS=str(plan.lease_margin_seconds),
        AGENTOPS_REQUEUE_AFTER_SECONDS=str(plan.requeue_after_seconds),
        AGENTOPS_SWEEP_INTERVAL_SECONDS="1",
        AGENTOPS_RETRY_BASE_SECONDS="1",
        AGENTOPS_RETRY_MAX_SECONDS="4",
        AGENTOPS_FAST_PASSWORD_HASHING="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def child_pids(pid: int) -> list[int]:
    """The ids of the direct children of process ``pid`` (a worker's pool processes)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(line) for line in out.stdout.split()]


def _sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class Child:
    """A child process started by the harness, its output in ``log``."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log: Path):
        self.name = name
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def crash(self) -> list[int]:
        """SIGKILL the process and its children at once; returns the children's ids."""
        children = child_pids(self.pid)
        _sigkill(self.pid)
        for pid in children:
            _sigkill(pid)
        self.proc.wait()
        return children

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL the process and its children after ``timeout`` seconds."""
        if not self.alive:
            for pid in child_pids(self.pid):
                _sigkill(pid)
            return
        children = child_pids(self.pid)
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _sigkill(self.pid)
            self.proc.wait()
        for pid in children:
            _sigkill(pid)


class RedisServer:
    """A ``redis-server`` without persistence on ``port``: a restart starts it empty."""

    def __init__(self, port: int, workdir: Path):
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.workdir = workdir
        self.child: Child | None = None
        self.start()

    def start(self) -> None:
        """Start the server and wait until it answers PING (at most 10 s).

        Raises:
            RuntimeError: it did not answer.
        """
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        cmd += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        self.child = Child("redis", cmd, dict(os.environ), self.workdir / "redis.log")
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline or not self.child.alive:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def crash(self) -> None:
        """SIGKILL the server: every message it held is lost."""
        if self.child is not None:
            self.child.crash()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(5)


class Cluster:
    """Redis, ``WORKERS`` Celery workers and Celery beat on one database; a context manager
    that stops every process it started (and only those) on exit."""

    def __init__(self, plan: FaultPlan, *, database: str, workdir: Path):
        self.plan = plan
        self.workdir = workdir
        self.redis = RedisServer(free_port(), workdir)
        self.env = child_env(plan, database=database, redis_url=self.redis.url)
        self.started = 0
        self.workers: list[Child] = []
        self.beat: Child | None = None
        self.unexpected_exits: Counter[str] = Counter()

    def __enter__(self) -> Cluster:
        try:
            self.workers = [self.start_worker() for _ in range(WORKERS)]
            self.beat = self._start_beat()
            for worker in self.workers:
                self._wait_ready(worker)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_worker(self) -> Child:
        """Start one more worker process (without waiting for it to be ready)."""
        self.started += 1
        name = f"worker{self.started}"
        cmd = [sys.executable, "-m", "celery", "-A", "agentops", "worker"]
        cmd += [f"--concurrency={WORKER_CONCURRENCY}", "-I", "tests.faults.tools"]
        cmd += ["--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
        cmd += ["--hostname", f"faults-{name}-{os.getpid()}@%h"]
        return Child(name, cmd, self.env, self.workdir / f"{name}.log")

    def _start_beat(self) -> Child:
        cmd = [sys.executable, "-m", "celery", "-A", "agentops", "beat", "--loglevel=INFO"]
        cmd += ["--schedule", str(self.workdir / "beat-schedule")]
        return Child("beat", cmd, self.env, self.workdir / "beat.log")

    @staticmethod
    def _wait_ready(worker: Child, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while "ready." not in worker.log.read_text(errors="replace"):
            if not worker.alive or time.monotonic() > deadline:
                tail = worker.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{worker.name} did not start:\n{tail}")
            time.sleep(0.2)

    def supervise(self) -> None:
        """Restart a worker or beat that exited on its own (the harness did not kill it), as a
        process supervisor would, and count it."""
        for i, worker in enumerate(self.workers):
            if not worker.alive:
                self.unexpected_exits["worker"] += 1
                worker.stop()
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
            worker.stop()
        if self.beat is not None:
            self.beat.stop(5)
        self.redis.stop()


# ---------------------------------------------------------------------------------------------
# Workload


def ensure_effects_table() -> None:
    """Create the ``fault_effects`` table (no unique constraint, on purpose) and empty it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {EFFECTS_TABLE} "
            "(key text NOT NULL, step_id bigint NOT NULL, at timestamptz NOT NULL DEFAULT now())"
        )
        cursor.execute(f"TRUNCATE {EFFECTS_TABLE}")


def create_workload(*, runs: int, steps: int, seed: int, hang_share: float) -> None:
    """Create ``runs`` plan runs of ``steps`` steps as ``Actor.system("harness")``.

    Each step calls the hang tool with probability ``hang_share`` (hanging on its first
    attempt, or on all three), else one of the two effect tools at even odds. Run in a child
    process with the cluster's ``REDIS_URL`` (``Cluster.run_child``), so that the runs' start
    messages reach the cluster's workers.
    """
    from runs.control.create import run_create

    rng = random.Random(seed)
    actor = Actor.system("harness")
    for i in range(runs):
        specs: list[dict[str, Any]] = []
        for j in range(steps):
            if rng.random() < hang_share:
                specs.append({"tool": HANG, "args": {"hangs": rng.choice([1, 1, 1, 3])}})
            else:
                tool = rng.choice([EFFECT, IDEMPOTENT_EFFECT])
                specs.append({"tool": tool, "args": {"label": f"run {i} step {j}"}})
        run_create(
            actor=actor,
            agent="plan",
            goal=f"fault injection run {i}",
            steps=specs,
            metadata={"harness": "faults"},
        )


def settled_share() -> float:
    """Share of all steps that are settled: terminal, or pending under a terminal run."""
    total = Step.objects.count()
    if not total:
        return 0.0
    settled = Step.objects.filter(
        Q(status__in=STEP_TERMINAL) | Q(status=StepStatus.PENDING, run__status__in=RUN_TERMINAL)
    ).count()
    return settled / total


def open_runs() -> int:
    """How many runs are not terminal yet."""
    return Run.objects.exclude(status__in=RUN_TERMINAL).count()


# ---------------------------------------------------------------------------------------------
# Faults


class FaultInjector:
    """Injects the faults of a ``FaultPlan`` into a ``Cluster`` and counts them.

    ``kill_times`` maps (step id, attempt number) to when the harness killed the process that
    held that attempt's lease, for the recovery-time figure.
    """

    def __init__(self, cluster: Cluster, plan: FaultPlan, rng: random.Random):
        self.cluster = cluster
        self.plan = plan
        self.rng = rng
        self.counts: Counter[str] = Counter()
        self.kill_times: dict[tuple[int, int], datetime] = {}

    def schedule(self) -> list[str]:
        """The faults to inject, in a random order."""
        parents = self.plan.kills // self.plan.parent_kill_every if self.plan.kills else 0
        kinds = ["kill_parent"] * parents + ["kill_child"] * (self.plan.kills - parents)
        kinds += ["redis_restart"] * self.plan.redis_restarts
        kinds += ["pg_terminate"] * self.plan.pg_terminations
        self.rng.shuffle(kinds)
        return kinds

    def run(self) -> None:
        """Inject every scheduled fault, each once the workload has progressed far enough,
        after a random pause of up to 0.3 s; stop early if every run ends first."""
        kinds = self.schedule()
        for i, kind in enumerate(kinds):
            target = FAULT_SPAN * i / len(kinds)
            waited = time.monotonic()
            # Wait for progress, but not forever: a stalled workload gets its faults anyway.
            while settled_share() < target and time.monotonic() - waited < 20:
                self.cluster.supervise()
                if not open_runs():
                    return
                time.sleep(0.1)
            time.sleep(self.rng.uniform(0, 0.3))
            self.cluster.supervise()
            if not open_runs():
                return
            getattr(self, kind)()

    def _leases(self) -> dict[int, tuple[int, int]]:
        """Running steps by the pid of the process holding their lease: (step id, attempt)."""
        leases = {}
        for step_id, owner, attempt in Step.objects.filter(status=StepStatus.RUNNING).values_list(
            "pk", "lease_owner", "attempts"
        ):
            with contextlib.suppress(ValueError):
                leases[int(owner.rsplit(":", 1)[-1])] = (step_id, attempt)
        return leases

    def _note_kill(self, pids: list[int], leases: dict[int, tuple[int, int]]) -> None:
        now = timezone.now()
        for pid in pids:
            if pid in leases:
                self.kill_times[leases[pid]] = now

    def kill_child(self) -> None:
        """SIGKILL one pool process, four times in five one that holds a running step."""
        deadline = time.monotonic() + 30
        while True:
            pool = [pid for w in self.cluster.workers if w.alive for pid in child_pids(w.pid)]
            if pool or time.monotonic() > deadline:
                break
            self.cluster.supervise()
            time.sleep(0.2)  # the workers are (re)starting
        if not pool:
            return
        leases = self._leases()
        busy = [pid for pid in pool if pid in leases]
        pid = self.rng.choice(busy if busy and self.rng.random() < 0.8 else pool)
        _sigkill(pid)
        self._note_kill([pid], leases)
        self.counts["kill_child"] += 1

    def kill_parent(self) -> None:
        """SIGKILL a worker's main process and its pool, then start a replacement worker."""
        i = self.rng.randrange(len(self.cluster.workers))
        leases = self._leases()
        children = self.cluster.workers[i].crash()
        self._note_kill(children, leases)
        self.cluster.workers[i] = self.cluster.start_worker()
        self.counts["kill_parent"] += 1

    def redis_restart(self) -> None:
        """SIGKILL Redis, wait 0.5-2 s, start it again empty on the same port."""
        self.cluster.redis.crash()
        time.sleep(self.rng.uniform(0.5, 2.0))
        self.cluster.redis.start()
        self.counts["redis_restart"] += 1

    def pg_terminate(self) -> None:
        """``pg_terminate_backend`` every other client connection to this database."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'"
            )
            (terminated,) = cursor.fetchone() or (0,)
        self.counts["pg_terminate"] += 1
        self.counts["pg_connections_terminated"] += terminated


# ---------------------------------------------------------------------------------------------
# Invariants and figures


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0-100) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def _p50_p99(values: list[float]) -> str:
    return f"{percentile(values, 50):.2f} / {percentile(values, 99):.2f}"


def _audit_mismatches(steps: list[Step], runs: list[Run]) -> list[str]:
    """Objects whose audit events do not form one chain of transitions from creation to the
    current status, or (steps) whose running events differ from their attempts."""
    history: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for object_type, object_id, from_state, to_state in (
        AuditEvent.objects.filter(object_type__in=["run", "step"])
        .order_by("id")
        .values_list("object_type", "object_id", "from_state", "to_state")
    ):
        history[object_type, object_id].append((from_state, to_state))
    attempts = Counter(StepAttempt.objects.values_list("step_id", flat=True))
    bad = []
    objects: list[tuple[str, Any, str]] = [("run", r.pk, r.status) for r in runs]
    objects += [("step", s.pk, s.status) for s in steps]
    for object_type, pk, status in objects:
        events = history.get((object_type, str(pk)), [])
        state: str | None = ""
        for from_state, to_state in events:
            # The first event creates the object (from ""); each later one changes its status.
            if from_state != state or from_state == to_state:
                state = None
                break
            state = to_state
        if state != status:
            bad.append(f"{object_type} {pk}: events {events} do not lead to {status}")
    for step in steps:
        running = sum(1 for _, to in history.get(("step", str(step.pk)), []) if to == "running")
        if not running == step.attempts == attempts[step.pk]:
            bad.append(
                f"step {step.pk}: {running} running events, {step.attempts} attempts, "
                f"{attempts[step.pk]} attempt rows"
            )
    return bad


def _recovery_seconds(
    kill_times: dict[tuple[int, int], datetime],
) -> tuple[list[float], list[float]]:
    """For each lost attempt, seconds from its loss (the harness's kill of its process, or its
    start when the harness did not kill that process) to the sweeper marking it lost
    (detection), and to the next attempt's start or, failing that, its step's end (recovery)."""
    starts = {
        (step_id, number): started
        for step_id, number, started in StepAttempt.objects.values_list(
            "step_id", "number", "started_at"
        )
    }
    ends = dict(Step.objects.values_list("pk", "finished_at"))
    detected, recovered = [], []
    for step_id, number, started, marked in StepAttempt.objects.filter(
        status=AttemptStatus.LOST
    ).values_list("step_id", "number", "started_at", "finished_at"):
        lost_at = kill_times.get((step_id, number), started)
        if marked is not None:
            detected.append((marked - lost_at).total_seconds())
        resumed_at = starts.get((step_id, number + 1)) or ends.get(step_id)
        if resumed_at is not None:
            recovered.append((resumed_at - lost_at).total_seconds())
    return detected, recovered


def check_invariants(
    *, faults: Counter[str], kill_times: dict[tuple[int, int], datetime]
) -> Report:
    """Check every invariant on the database once the processes are stopped; the figures
    include ``faults`` (counts by kind) and recovery times computed with ``kill_times``."""
    runs = list(Run.objects.all())
    steps = list(Step.objects.select_related("run"))
    report = Report()
    failures = report.failures

    stuck = [r for r in runs if r.status not in RUN_TERMINAL]
    if stuck:
        failures.append(f"{len(stuck)} runs not terminal: {[str(r.pk) for r in stuck[:5]]}")
    lost = [
        s
        for s in steps
        if s.status not in STEP_TERMINAL
        and not (s.status == StepStatus.PENDING and s.run.status == RunStatus.FAILED)
    ]
    if lost:
        failures.append(f"{len(lost)} steps lost: {[(s.pk, s.status) for s in lost[:5]]}")

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, count(*) FROM {EFFECTS_TABLE} GROUP BY key")  # noqa: S608
        effects = dict(cursor.fetchall())
    duplicates = {key: n for key, n in effects.items() if n > 1}
    if duplicates:
        failures.append(f"{len(duplicates)} keys with duplicate effects: {list(duplicates)[:5]}")
    effect_mismatches = []
    for step in steps:
        n = effects.get(step.idempotency_key, 0)
        if step.tool in EFFECT_TOOLS and step.status == StepStatus.SUCCEEDED and n != 1:
            effect_mismatches.append(f"succeeded step {step.pk} has {n} effects")
        elif step.attempts == 0 and n:
            effect_mismatches.append(f"step {step.pk} never attempted has {n} effects")
    if effect_mismatches:
        failures.append(f"{len(effect_mismatches)} effect mismatches: {effect_mismatches[:5]}")

    ledger = dict(ToolCall.objects.values_list("idempotency_key", "status"))
    ledger_mismatches = [
        s.pk
        for s in steps
        if s.status == StepStatus.SUCCEEDED
        and ledger.get(s.idempotency_key) != CallStatus.SUCCEEDED
    ]
    if ledger_mismatches:
        failures.append(
            f"{len(ledger_mismatches)} succeeded steps whose ledger row is not succeeded: "
            f"{ledger_mismatches[:5]}"
        )

    audit_bad = _audit_mismatches(steps, runs)
    if audit_bad:
        failures.append(f"{len(audit_bad)} audit mismatches: {audit_bad[:3]}")
    broken = [r for r in (chain_verify(c) for c in chains()) if not r.ok]
    if broken:
        failures.append(f"{len(broken)} audit chains broken: {[b.chain for b in broken[:5]]}")

    attempts = list(StepAttempt.objects.values_list("step_id", "number", "status", "error"))
    numbers = {(step_id, number) for step_id, number, _, _ in attempts}
    lost_attempts = [(s, n) for s, n, status, _ in attempts if status == AttemptStatus.LOST]
    retried = sum(1 for step_id, number in lost_attempts if (step_id, number + 1) in numbers)
    detected, recovered = _recovery_seconds(kill_times)
    error_types = Counter(
        (r.error or {}).get("type", "?") for r in runs if r.status == RunStatus.FAILED
    )
    report.figures = {
        "runs": len(runs),
        "steps": len(steps),
        "step attempts": len(attempts),
        "faults: worker pool processes killed": faults["kill_child"],
        "faults: worker main processes killed": faults["kill_parent"],
        "faults: redis restarts": faults["redis_restart"],
        "faults: pg_terminate_backend rounds": faults["pg_terminate"],
        "  connections terminated": faults["pg_connections_terminated"],
        "faults: hang-tool timeouts": sum(
            1 for *_, error in attempts if (error or {}).get("type") == "timeout"
        ),
        "unexpected exits restarted (worker, beat)": (
            f"{faults['unexpected_worker']}, {faults['unexpected_beat']}"
        ),
        "attempts lost (worker gone)": len(lost_attempts),
        "  of which retried": retried,
        "loss detected after, p50 / p99 (s)": _p50_p99(detected),
        "next attempt (or step end) after, p50 / p99 (s)": _p50_p99(recovered),
        "runs by status": dict(Counter(r.status for r in runs)),
        "failed runs by error type": dict(error_types),
        "steps by status": dict(Counter(s.status for s in steps)),
        "lost steps": len(lost),
        "stuck runs": len(stuck),
        "duplicate effects": len(duplicates),
        "effect mismatches": len(effect_mismatches),
        "ledger mismatches": len(ledger_mismatches),
        "audit mismatches": len(audit_bad),
        "audit chains verified / broken": f"{len(chains()) - len(broken)} / {len(broken)}",
    }
    return report


def run_harness(plan: FaultPlan, *, workdir: Path) -> Report:
    """Run the whole harness on the database of Django's default connection.

    That database must be migrated and hold no runs (``check_invariants`` looks at every run);
    logs of every process go to ``workdir``. The figures include the wall time (s) from the
    creation of the first run until every run was terminal (or the wait gave up).

    Raises:
        RuntimeError: a process did not start, or creating the workload failed.
    """
    rng = random.Random(plan.seed)
    ensure_effects_table()
    with Cluster(plan, database=database_url(), workdir=workdir) as cluster:
        injector = FaultInjector(cluster, plan, rng)
        started = time.monotonic()
        cluster.run_child(
            "workload",
            "from tests.faults.harness import create_workload; "
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
    report = check_invariants(faults=faults, kill_times=injector.kill_times)
    report.figures["wall time (s)"] = round(wall, 1)
    return report
