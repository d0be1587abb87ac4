"""Retention purge: rows per second deleting old steps in batches, and the longest batch.

Each repetition loads ``runs`` succeeded plan runs of ``steps_per_run`` steps that finished
400 days ago (``data.load_runs``: 1M steps at full size, next to whatever the other
benchmarks left, e.g. the API benchmark's 1M recent steps) and purges them with
``runs.retention.retention_purge`` under one ``delete`` policy of 30 days, at its default batch
size: steps deleted / the purge's seconds, and its ``longest_batch_ms``. The baseline loads the
same data again and deletes it with a plain SQL loop, one transaction per batch of the same
size (``DELETE FROM runs_step WHERE id IN (SELECT id ... LIMIT n)``, then the runs).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.data import load_runs
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target

NAME = "retention"
AGE_DAYS = 400
TTL_DAYS = 30


@dataclass(frozen=True)
class Size:
    runs: int
    steps_per_run: int


SIZES = {"tiny": Size(runs=20, steps_per_run=100), "full": Size(runs=10_000, steps_per_run=100)}

FIGURES = [
    Figure("rate", "purge rate (baseline: plain SQL batches)", "steps/s", (Target(">=", 20_000),)),
    Figure("longest", "longest batch transaction", "ms", (Target("<=", 200),)),
]

_BATCH = """
DELETE FROM runs_step WHERE id IN (
    SELECT s.id FROM runs_step s JOIN runs_run r ON r.id = s.run_id
    WHERE r.status = 'succeeded' AND r.finished_at < now() - %s * interval '1 day' LIMIT %s)
"""
_RUNS = """
DELETE FROM runs_run WHERE status = 'succeeded' AND finished_at < now() - %s * interval '1 day'
"""


def purge(size: Size, tag: str) -> tuple[float, float]:
    """Load old runs and purge them with the service; returns (steps/s, longest batch ms)."""
    from agentops.actors import Actor
    from runs.models import RetentionPolicy
    from runs.retention import retention_purge

    RetentionPolicy.objects.get_or_create(name="bench", defaults={"ttl_days": TTL_DAYS})
    load_runs(tag=tag, runs=size.runs, steps_per_run=size.steps_per_run, age_days=AGE_DAYS)
    report = retention_purge(actor=Actor.system("bench"))
    expected = size.runs * size.steps_per_run
    if report["steps"] != expected:
        raise RuntimeError(f"purged {report['steps']} steps, expected {expected}")
    return report["steps"] / report["seconds"], float(report["longest_batch_ms"])


def plain_delete(size: Size, tag: str, batch: int) -> tuple[float, float]:
    """Load old runs and delete them with plain SQL batches; returns (steps/s, longest ms)."""
    from django.db import connection, transaction

    load_runs(tag=tag, runs=size.runs, steps_per_run=size.steps_per_run, age_days=AGE_DAYS)
    deleted, longest = 0, 0.0
    began = time.monotonic()
    while True:
        started = time.monotonic()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_BATCH, [TTL_DAYS, batch])
            count = cursor.rowcount
        longest = max(longest, (time.monotonic() - started) * 1000)
        deleted += count
        if count < batch:
            break
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_RUNS, [TTL_DAYS])
    longest = max(longest, (time.monotonic() - started) * 1000)
    return deleted / (time.monotonic() - began), longest


def run(bench: Bench) -> Iterator[Sample]:
    from django.conf import settings

    size = SIZES[bench.size]
    bench.stop_workers()
    for i in range(bench.repeat):
        rate, longest = purge(size, f"retention-{i}")
        base_rate, base_longest = plain_delete(
            size, f"retention-plain-{i}", settings.AGENTOPS_RETENTION_BATCH_SIZE
        )
        yield Sample("rate", rate, base_rate)
        yield Sample("longest", longest, base_longest)
