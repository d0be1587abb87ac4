"""Dispatch latency: step N's commit → step N+1's start, at half of the maximum throughput.

Two workers run plan runs of ``steps`` no-op ``bench_clock`` steps created on a fixed schedule,
so that steps arrive at half of the step throughput this invocation measured with two workers
(the ``throughput`` benchmark's median; measured here first when it did not run). Each gap is
the wall-clock time step N+1's tool was called at (its result) - ``step[N].finished_at``
(taken inside the transaction that records step N, before its commit): the rest of that
transaction and its commit, then whatever brings step N+1 to its tool (a worker claims the
next step in the same transaction, so no broker hop unless its time slice is over). The
baseline sends bare no-op chains on the same schedule and measures each hop from the moment a
link sends the next to the next one's start.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.bench_throughput import SIZES as THROUGHPUT_SIZES
from benchmarks.bench_throughput import app_steps_per_second, create_runs, wait_runs
from benchmarks.harness import Bench, chain_latencies, paced
from benchmarks.table import Figure, Sample, Target
from testsupport.statistics import percentile

NAME = "dispatch"


@dataclass(frozen=True)
class Size:
    runs: int
    steps: int


SIZES = {"tiny": Size(runs=3, steps=3), "full": Size(runs=20, steps=10)}

FIGURES = [
    Figure("p50", "step commit → next tool call, p50", "ms", (Target("<=", 5),)),
    Figure("p95", "step commit → next tool call, p95", "ms"),
    Figure("p99", "step commit → next tool call, p99", "ms", (Target("<=", 50),)),
    Figure("rate", "offered load (half the 2-worker maximum)", "steps/s"),
]

_GAPS = """
SELECT ((b.result #>> '{}')::float8 - EXTRACT(EPOCH FROM a.finished_at)) * 1000
FROM runs_step a JOIN runs_step b ON b.run_id = a.run_id AND b.index = a.index + 1
WHERE a.run_id = ANY(%s::uuid[])
"""
CLOCK_STEP = {"tool": "bench_clock", "args": {}}


def app_gaps(ids: list[str]) -> list[float]:
    """Every step N finished → step N+1's tool called gap of the runs ``ids``, in ms."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(_GAPS, [ids])
        return [float(row[0]) for row in cursor.fetchall()]


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    if "steps_per_s_2" not in bench.shared:
        bench.stop_workers()
        bench.start_workers(2)
        measured = app_steps_per_second(bench, THROUGHPUT_SIZES[bench.size])
        bench.shared["steps_per_s_2"] = [measured.steps_per_s]
    rate = statistics.median(bench.shared["steps_per_s_2"]) / 2
    interval = size.steps / rate
    for _ in range(bench.repeat):
        bench.start_workers(2)
        ids = []
        for _i in paced(size.runs, interval):
            ids += create_runs(1, size.steps, step=CLOCK_STEP)
        wait_runs(ids, "succeeded", timeout=60 + size.runs * size.steps)
        gaps = app_gaps(ids)
        base = chain_latencies(bench, size.runs, size.steps, interval)
        for q in (50, 95, 99):
            yield Sample(f"p{q}", percentile(gaps, q), percentile(base, q))
        yield Sample("rate", rate)
