"""What the Celery broker and workers say: queue depths and ages, workers and their tasks.

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

from agentops import celery_app

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
