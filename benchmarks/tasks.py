"""The bare Celery baseline's task, the dispatch benchmark's clock tool, and the benchmarks' own
Celery queue.

Workers started by ``benchmarks/run.py`` load this module (``celery -A agentops worker -I
benchmarks.tasks -Q <queue>``) and so does the benchmark process. When
``AGENTOPS_BENCH_QUEUE`` is set, every task either of them sends (the project's and this one)
goes to that queue instead of Celery's default, so the benchmark never shares a broker queue
with other workers using the same Redis database (a test suite's worker, say).
"""

from __future__ import annotations

import os
import time
from functools import cache

import redis
from celery import shared_task
from django.conf import settings

from agentops.celery import app
from runs.tools import ToolContext, register

QUEUE_ENV = "AGENTOPS_BENCH_QUEUE"

if os.environ.get(QUEUE_ENV):
    app.conf.task_default_queue = os.environ[QUEUE_ENV]


@cache
def results() -> redis.Redis:
    """The Redis client (``REDIS_URL``) the baseline records its timings with."""
    return redis.Redis.from_url(settings.REDIS_URL)


@shared_task(name="benchmarks.noop")
def noop(key: str, link: int, links: int, sent_at: float, record: bool) -> None:
    """One link of a chain of ``links`` no-op tasks; enqueues the next link, like a step does.

    ``sent_at`` is the wall-clock time (``time.time()``, seconds) the link was sent. With
    ``record`` each link appends ``"<link> <latency>"`` (start - ``sent_at``, seconds) to the
    Redis list ``<key>:latency``; the last link appends its finish time to ``<key>:done``.
    """
    started = time.time()
    if record:
        results().rpush(f"{key}:latency", f"{link} {started - sent_at}")
    if link + 1 < links:
        noop.delay(key, link + 1, links, time.time(), record)
    else:
        results().rpush(f"{key}:done", time.time())


@register(
    "bench_clock",
    description="Benchmark no-op: returns the wall-clock time (epoch seconds) it was called at.",
)
def bench_clock(args: dict[str, object], ctx: ToolContext) -> float:
    """The time this step's tool call started, so the dispatch benchmark can measure from the
    previous step's commit to the moment the next tool really runs."""
    return time.time()
