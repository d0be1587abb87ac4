"""What the Celery broker and workers say: queue depths and ages, workers and their tasks.

Asking the workers takes a second (a ping waits its whole timeout for answers), so pages do
not ask them: a worker task does (``workers_report_refresh``, sent by the workers page while
the report in the cache is older than ``AGENTOPS_WORKERS_REFRESH_SECONDS``) and pages render
the last report (``workers_report``), saying how old it is.

Queues are Redis lists (kombu's Redis transport): a message is pushed at the head and taken
from the tail, so the tail is the oldest. Each queue has a list per priority step (the queue's
name, then ``name\\x06\\x16<priority>``). A message's age comes from its ``sent_at`` header
(``fleet.receivers.stamp_sent_at``); messages sent without it have no known age.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache
from kombu.exceptions import KombuError

from agentops import celery_app

# The cache keys of the last workers report and of the claim on asking for a new one, and how
# long a report is kept (seconds): an older one is no longer worth showing.
REPORT_KEY = "fleet:workers-report"
ASKING_KEY = "fleet:workers-asking"
REPORT_KEPT_SECONDS = 600

# kombu's Redis transport: priority steps and the separator of a priority's list name.
PRIORITY_STEPS = (0, 3, 6, 9)
PRIORITY_SEP = "\x06\x16"


@dataclass(frozen=True)
class QueueState:
    """A queue: ``messages`` waiting (all priorities), ``oldest_age_seconds`` of the oldest
    (None: empty, or its messages carry no ``sent_at``)."""

    name: str
    messages: int
    oldest_age_seconds: float | None


def _queue_keys(name: str) -> list[str]:
    return [name if step == 0 else f"{name}{PRIORITY_SEP}{step}" for step in PRIORITY_STEPS]


def _sent_at(raw: bytes | None) -> float | None:
    if raw is None:
        return None
    try:
        sent = json.loads(raw).get("headers", {}).get("sent_at")
    except (ValueError, AttributeError):
        return None
    return float(sent) if isinstance(sent, int | float) else None


def queue_states(*, now: float | None = None) -> list[QueueState]:
    """The state of every queue of ``CELERY_TASK_QUEUES``, in one round trip to Redis; an
    empty list when the broker is not Redis (eager development set-up).

    Raises:
        redis.RedisError: Redis cannot be reached (within 2 s).
    """
    url = str(settings.CELERY_BROKER_URL)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return []
    names = [queue.name for queue in settings.CELERY_TASK_QUEUES]
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        pipe = client.pipeline(transaction=False)
        for name in names:
            for key in _queue_keys(name):
                pipe.llen(key)
                pipe.lindex(key, -1)
        replies = pipe.execute()
    finally:
        client.close()
    now = time.time() if now is None else now
    states = []
    per_queue = 2 * len(PRIORITY_STEPS)
    for position, name in enumerate(names):
        part = replies[position * per_queue : (position + 1) * per_queue]
        depth = sum(int(n) for n in part[0::2])
        sent = [s for s in (_sent_at(raw) for raw in part[1::2]) if s is not None]
        age = max(0.0, now - min(sent)) if sent else None
        states.append(QueueState(name=name, messages=depth, oldest_age_seconds=age))
    return states


@dataclass
class WorkerState:
    """A worker that answered: its node ``name``, ``stats`` (Celery's ``inspect stats``: pid,
    pool, total tasks by name, uptime) and ``active`` tasks (``id``, ``name``, ``args``,
    ``kwargs``, ``time_start``, ``worker_pid``)."""

    name: str
    stats: dict[str, Any] = field(default_factory=dict)
    active: list[dict[str, Any]] = field(default_factory=list)

    @property
    def concurrency(self) -> int | None:
        """Pool processes (``max-concurrency``), when it said."""
        return self.stats.get("pool", {}).get("max-concurrency")

    @property
    def tasks_done(self) -> int:
        """Tasks it has received since it started, all names."""
        return sum(self.stats.get("total", {}).values())


def worker_states(*, timeout: float) -> list[WorkerState]:
    """The workers that answer a ping within ``timeout`` seconds, by name, with their stats
    and active tasks (asked of those workers only, in parallel, each within ``timeout``).

    Raises:
        kombu / redis errors: the broker cannot be reached.
    """
    names = sorted((celery_app.control.inspect(timeout=timeout).ping() or {}).keys())
    if not names:
        return []

    def ask(method: str) -> dict[str, Any]:
        inspect = celery_app.control.inspect(destination=names, limit=len(names), timeout=timeout)
        return getattr(inspect, method)() or {}

    with ThreadPoolExecutor(max_workers=2) as pool:
        stats_reply, active_reply = pool.map(ask, ["stats", "active"])
    return [
        WorkerState(
            name=name, stats=stats_reply.get(name) or {}, active=active_reply.get(name) or []
        )
        for name in names
    ]


@dataclass(frozen=True)
class WorkersReport:
    """What the workers said when last asked: ``workers`` that answered, ``asked_at`` (Unix
    time, seconds) and ``error`` (why the broker could not be asked; empty when it was)."""

    workers: list[WorkerState]
    asked_at: float
    error: str = ""

    def age_seconds(self, now: float) -> float:
        """Seconds since the workers were asked, at ``now`` (Unix time)."""
        return max(0.0, now - self.asked_at)


def workers_report_refresh(*, timeout: float) -> WorkersReport:
    """Ask the workers (``worker_states`` with ``timeout`` seconds) and keep their answer as
    the report pages render (``workers_report_keep``); an unreachable broker is reported in
    ``error``, not raised."""
    asked_at = time.time()
    try:
        report = WorkersReport(worker_states(timeout=timeout), asked_at)
    except (KombuError, OSError, redis.RedisError) as exc:
        report = WorkersReport([], asked_at, error=str(exc) or type(exc).__name__)
    workers_report_keep(report)
    return report


def workers_report_keep(report: WorkersReport) -> None:
    """Keep ``report`` in the cache for ``REPORT_KEPT_SECONDS`` as the one pages render, and
    release the claim on asking for it (``workers_report_claim``)."""
    cache.set(
        REPORT_KEY,
        {
            "asked_at": report.asked_at,
            "error": report.error,
            "workers": [
                {"name": w.name, "stats": w.stats, "active": w.active} for w in report.workers
            ],
        },
        timeout=REPORT_KEPT_SECONDS,
    )
    cache.delete(ASKING_KEY)


def workers_report() -> WorkersReport | None:
    """The last report in the cache (one round trip to Redis, no question to the workers),
    or None when there is none (never asked, expired, or the cache is unreachable)."""
    kept = cache.get(REPORT_KEY)
    if not isinstance(kept, dict):
        return None
    return WorkersReport(
        workers=[WorkerState(**worker) for worker in kept["workers"]],
        asked_at=kept["asked_at"],
        error=kept["error"],
    )


def workers_report_claim(*, seconds: int) -> bool:
    """Claim asking the workers for a new report: True for the one caller that may send the
    refresh task now, False while another's claim holds (``seconds``, the longest a refresh
    may take to arrive before someone asks again) or the cache is unreachable."""
    return bool(cache.add(ASKING_KEY, 1, timeout=seconds))
