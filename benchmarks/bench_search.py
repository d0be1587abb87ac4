"""Search: server time of the runs list's full-text search (``?q=``, ``runs.search``) over
``runs * steps_per_run`` steps (1M at full size).

Data, set-based SQL in the benchmark's own database (``data.load_runs``, then one
``INSERT ... SELECT`` of messages): ``runs`` plan runs of ``steps_per_run`` steps, each step's
arguments a small booking (``reservation_id``: six characters of an md5 of the run and step
numbers, unique in practice; ``customer``; a note of common words) and its result a
confirmation naming one of ``FARE_CLASSES``; each run one user message naming its customer.
The search indexes (migration ``0029_search_indexes``) are kept up to date by the inserts, as
in production, then the tables are analyzed.

Server time of one search: ``django.test.Client.get`` of ``/?q=<text>`` with an operator's
session (middleware, view, queries, template; no HTTP server, as ``bench_pages``), for
``queries`` searches cycling over three selective kinds: a reservation id found only in one
step's arguments, a customer id (one run's steps and message), and a word found nowhere.
Figure: the p95 of those server times; baseline: the p95 of the same list without ``q`` in
the same run (its first page, newest first). Then ``queries / 4`` searches for a common word
(a fare class, in 1 step in ``len(FARE_CLASSES)``), reported without a target: the index
finds every matching step and each one's run is read from the table, so its time grows with
the matches (125k at full size), unlike the selective searches'. Target (issue 30): p95 at
most 50 ms at 1M steps. ``BENCH_SEARCH_RUNS`` sets another number of runs (e.g. 1000: 100k
steps at full size, about a minute).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.data import bench_users, load_runs
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target

NAME = "search"
FARE_CLASSES = ("economy", "premium", "business", "first", "basic", "flex", "saver", "plus")


@dataclass(frozen=True)
class Size:
    runs: int
    steps_per_run: int
    warmup: int
    queries: int


SIZES = {
    "tiny": Size(runs=200, steps_per_run=50, warmup=4, queries=40),
    "full": Size(runs=10_000, steps_per_run=100, warmup=20, queries=200),
}
# ``BENCH_SEARCH_RUNS=<n>`` replaces the size's number of runs (steps: ``n * steps_per_run``),
# to measure between tiny and full.
RUNS_VARIABLE = "BENCH_SEARCH_RUNS"

FIGURES = [
    Figure(
        "search_p95",
        "runs list search (reservation id, customer id, absent word): server time p95"
        " (baseline: the list unfiltered)",
        "ms",
        (Target("<=", 50),),
    ),
    Figure("search_median", "runs list search (the same): server time, median", "ms"),
    Figure(
        "common_p95",
        "runs list search for a common word (in 1 step in 8): server time p95",
        "ms",
    ),
    Figure("steps", "steps searched", "steps"),
]

_ARGS = (
    "jsonb_build_object('reservation_id', upper(substr(md5('r' || g || ':' || i), 1, 6)),"
    " 'customer', 'C-' || g, 'note', 'please move the return flight by one day')"
)
_RESULT = (
    "jsonb_build_object('status', 'confirmed', 'fare', (ARRAY['"
    + "','".join(FARE_CLASSES)
    + "'])[1 + (g + i) %% "
    + str(len(FARE_CLASSES))
    + "])"
)
_MESSAGES = """
INSERT INTO runs_message (run_id, position, role, content, tool_call_id, name, extra, tokens,
    created_at)
SELECT md5(%(tag)s || g)::uuid, 0, 'user',
    to_jsonb('Customer C-' || g || ' wants to change a booking'), '', '', '{}', 12, now()
FROM generate_series(1, %(runs)s) AS g
"""


def _load(size: Size) -> None:
    from django.db import connection

    load_runs(
        tag="search",
        runs=size.runs,
        steps_per_run=size.steps_per_run,
        args_sql=_ARGS,
        result_sql=_RESULT,
    )
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES, {"tag": "search", "runs": size.runs})
        # As autovacuum would soon after a load: the GIN indexes' pending entries merged
        # (a search reads them one by one until then), statistics of the new rows.
        for table in ("runs_run", "runs_step", "runs_message"):
            cursor.execute(f"VACUUM ANALYZE {table}")


def _terms(size: Size) -> tuple[list[str], list[str]]:
    """The searched texts, in the order they are sent: the selective kinds in turn
    (reservation id, customer id, absent word), each over different runs and steps (spread
    over the table); and the common words."""
    import hashlib

    selective = []
    for n in range(size.queries):
        run = 1 + (n * 7919) % size.runs
        step = (n * 31) % size.steps_per_run
        kind = n % 3
        if kind == 0:
            selective.append(
                hashlib.md5(f"r{run}:{step}".encode(), usedforsecurity=False)
                .hexdigest()[:6]
                .upper()
            )
        elif kind == 1:
            selective.append(f"C-{run}")
        else:
            selective.append(f"walrus{n}")
    common = [FARE_CLASSES[n % len(FARE_CLASSES)] for n in range(size.queries // 4)]
    return selective, common


def _times(client: object, urls: list[str], warmup: int) -> list[float]:
    times = []
    for i, url in enumerate(urls[:warmup] + urls):
        began = time.perf_counter()
        response = client.get(url)  # type: ignore[attr-defined]
        elapsed = (time.perf_counter() - began) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"GET {url}: {response.status_code}")
        if i >= warmup:
            times.append(elapsed)
    return times


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[94]


def run(bench: Bench) -> Iterator[Sample]:
    from urllib.parse import urlencode

    from django.test import Client

    size = SIZES[bench.size]
    if os.environ.get(RUNS_VARIABLE):
        size = dataclasses.replace(size, runs=int(os.environ[RUNS_VARIABLE]))
    bench.stop_workers()
    _load(size)
    client = Client()
    client.force_login(bench_users()["operator"])
    selective, common = (
        [f"/?{urlencode({'q': term})}" for term in terms] for terms in _terms(size)
    )
    for _ in range(bench.repeat):
        plain = _times(client, ["/"] * size.queries, size.warmup)
        found = _times(client, selective, size.warmup)
        yield Sample("search_p95", _p95(found), _p95(plain))
        yield Sample("search_median", statistics.median(found))
        yield Sample("common_p95", _p95(_times(client, common, size.warmup)))
        yield Sample("steps", size.runs * size.steps_per_run)
