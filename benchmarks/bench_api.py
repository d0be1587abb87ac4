"""API and pages: latency under a fixed arrival rate with 1M steps in the database, and the SQL
queries per page.

Data: ``runs`` plan runs of 50 succeeded steps loaded with SQL (``data.load_runs``: 1M steps
at full size), one run of 10 steps, and ``pending`` runs waiting for a reviewer (created
through the services, so they have audit events and approval requests).

Latency: an open-loop generator (asyncio + aiohttp in this process) starts request i at
``i / rate`` seconds, whatever the responses, and measures each from its scheduled start to
the end of its response, against the daphne processes (``--web-processes``, one per core by
default; no workers: the created runs stay queued). Phases of ``seconds`` each:
``POST /api/v1/runs/`` (one echo step, token auth) at ``create_rate`` and again at
``read_rate``; ``GET /api/v1/runs/`` (token, 50 a page), the run page ``/runs/<id>/`` of a
random 50-step run and the approvals inbox ``/approvals/`` (session cookie) at ``read_rate``.
Baseline: ``GET /api/v1/tools/`` (token auth, no database work past authentication) at the same
rate, in the same repetition. A request that fails (not 2xx, or no answer in 30 s) counts as
an infinite latency, and so does one that is due while ``MAX_IN_FLIGHT`` requests still wait
(it is dropped, as k6 drops iterations past ``maxVUs``); both are also counted.

Queries per page: the same views in-process (``django.test.Client``) under
``CaptureQueriesContext``, at two sizes each: runs list ``?page_size=10`` and ``100``, run page
of 10 and 50 steps, inbox with ``pending_small`` and ``pending`` requests; the figure is the
larger page's count and the growth is larger - smaller (must be 0).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from benchmarks.data import bench_users, load_runs
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target
from testsupport.statistics import percentile

NAME = "api"
STEPS_PER_RUN = 50
# Like k6's maxVUs: past this many requests waiting, a due request is dropped (and counted)
# instead of started, so an overloaded server cannot open a PostgreSQL connection per waiting
# request (Django under ASGI runs each request in its own thread, with its own connection).
MAX_IN_FLIGHT = 30


@dataclass(frozen=True)
class Size:
    runs: int
    pending_small: int
    pending: int
    create_rate: float
    read_rate: float
    seconds: float


SIZES = {
    "tiny": Size(runs=40, pending_small=2, pending=4, create_rate=20, read_rate=10, seconds=1),
    "full": Size(
        runs=20_000, pending_small=5, pending=50, create_rate=200, read_rate=50, seconds=5
    ),
}

_PAGES = {
    "create": ("create-run", (Target("<=", 50),)),
    "create_at_read_rate": ("create-run at the read rate", ()),
    "list": ("runs list API", (Target("<=", 100),)),
    "page": ("run page", (Target("<=", 100),)),
    "inbox": ("approvals inbox", (Target("<=", 100),)),
}

FIGURES = [
    Figure(f"{page}_p{q}", f"{label} p{q} (baseline: tools API)", "ms", targets if q == 95 else ())
    for page, (label, targets) in _PAGES.items()
    for q in (50, 95, 99)
] + [
    Figure(f"{page}_lost", f"{label}: dropped or failed requests", "requests")
    for page, (label, _) in _PAGES.items()
] + [
    Figure("queries_list", "runs list API: queries per page of 100", "queries",
           (Target("<=", 10),)),
    Figure("growth_list", "runs list API: more queries for 100 than 10", "queries",
           (Target("<=", 0),)),
    Figure("queries_page", "run page: queries, 50 steps", "queries", (Target("<=", 10),)),
    Figure("growth_page", "run page: more queries for 50 than 10 steps", "queries",
           (Target("<=", 0),)),
    Figure("queries_inbox", "inbox: queries, all pending", "queries", (Target("<=", 10),)),
    Figure("growth_inbox", "inbox: more queries for all than a few pending", "queries",
           (Target("<=", 0),)),
]  # fmt: skip

CREATE_BODY = {
    "agent": "plan",
    "goal": "api bench",
    "steps": [{"tool": "echo", "args": {"value": 1}}],
}
INBOX_RUN_STEPS = [
    {"tool": "echo", "args": {"value": 1}},
    {"tool": "send_email", "args": {"to": ["ops@example.com"], "subject": "bench", "body": "x"}},
]


def _open_pending(count: int) -> None:
    """Create ``count`` runs that wait for a reviewer, in-process with eager tasks."""
    from agentops.actors import Actor
    from agentops.celery import app
    from runs.control.create import run_create

    app.conf.task_always_eager = True
    try:
        for i in range(count):
            run_create(actor=Actor.system("bench"), agent="plan", goal=f"inbox {i}",
                       steps=INBOX_RUN_STEPS)  # fmt: skip
    finally:
        app.conf.task_always_eager = False


def _queries(client: Any, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code}")
    return len(queries)


@dataclass
class Fixture:
    """What the phases request: tokens, session cookies and the run ids of the run pages."""

    operator_token: str
    operator_cookie: str
    reviewer_cookie: str
    run_ids: list[str]
    queries: dict[str, int]


def prepare(size: Size, seed: int) -> Fixture:
    """Load the data, count the queries per page, and log the users in."""
    from django.conf import settings
    from django.test import Client

    users = bench_users()
    began = time.monotonic()
    run_ids = load_runs(tag="api", runs=size.runs, steps_per_run=STEPS_PER_RUN)
    (small,) = load_runs(tag="api-small", runs=1, steps_per_run=10)
    print(f"loaded {size.runs * STEPS_PER_RUN} steps in {time.monotonic() - began:.0f} s")
    operator, reviewer = Client(), Client()
    operator.force_login(users["operator"])
    reviewer.force_login(users["reviewer"])
    api = Client(HTTP_AUTHORIZATION=f"Token {users['operator_token']}")
    _open_pending(size.pending_small)
    queries = {
        "list_small": _queries(api, "/api/v1/runs/?page_size=10"),
        "list": _queries(api, "/api/v1/runs/?page_size=100"),
        "page_small": _queries(operator, f"/runs/{small}/"),
        "page": _queries(operator, f"/runs/{run_ids[0]}/"),
        "inbox_small": _queries(reviewer, "/approvals/"),
    }
    _open_pending(size.pending - size.pending_small)
    queries["inbox"] = _queries(reviewer, "/approvals/")
    cookie = settings.SESSION_COOKIE_NAME
    sample = random.Random(seed).sample(run_ids, min(len(run_ids), 1000))
    return Fixture(
        operator_token=users["operator_token"],
        operator_cookie=f"{cookie}={operator.cookies[cookie].value}",
        reviewer_cookie=f"{cookie}={reviewer.cookies[cookie].value}",
        run_ids=sample,
        queries=queries,
    )


Request = Callable[[aiohttp.ClientSession, int], Any]


async def open_loop(
    base_url: str, rate: float, seconds: float, request: Request
) -> tuple[list[float], int]:
    """Start ``rate * seconds`` requests at a constant arrival rate (requests/s), at most
    ``MAX_IN_FLIGHT`` at once; returns each request's latency from its scheduled start in ms,
    ``inf`` for one that failed (not 2xx, or no answer in 30 s) or was dropped because
    ``MAX_IN_FLIGHT`` were still waiting, and how many were dropped or failed."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    in_flight = 0

    async def one(session: aiohttp.ClientSession, i: int, scheduled: float) -> None:
        nonlocal in_flight
        in_flight += 1
        try:
            async with request(session, i) as response:
                await response.read()
                ok = 200 <= response.status < 300
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        finally:
            in_flight -= 1
        latencies.append((loop.time() - scheduled) * 1000 if ok else math.inf)

    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(base_url, timeout=timeout, connector=connector) as session:
        began = loop.time() + 0.05
        tasks = []
        for i in range(int(rate * seconds)):
            scheduled = began + i / rate
            await asyncio.sleep(max(0.0, scheduled - loop.time()))
            if in_flight >= MAX_IN_FLIGHT:
                latencies.append(math.inf)
                continue
            tasks.append(asyncio.create_task(one(session, i, scheduled)))
        await asyncio.gather(*tasks)
    return latencies, sum(1 for x in latencies if math.isinf(x))


async def _phases(
    bench: Bench, size: Size, fx: Fixture
) -> tuple[dict[str, list[float]], dict[str, int]]:
    token = {"Authorization": f"Token {fx.operator_token}"}
    operator = {"Cookie": fx.operator_cookie}
    reviewer = {"Cookie": fx.reviewer_cookie}
    phases: dict[str, tuple[float, Request]] = {
        "create": (size.create_rate,
                   lambda s, i: s.post("/api/v1/runs/", json=CREATE_BODY, headers=token)),
        "tools_create": (size.create_rate, lambda s, i: s.get("/api/v1/tools/", headers=token)),
        "create_at_read_rate": (size.read_rate,
                   lambda s, i: s.post("/api/v1/runs/", json=CREATE_BODY, headers=token)),
        "list": (size.read_rate, lambda s, i: s.get("/api/v1/runs/", headers=token)),
        "page": (size.read_rate,
                 lambda s, i: s.get(f"/runs/{fx.run_ids[i % len(fx.run_ids)]}/", headers=operator)),
        "inbox": (size.read_rate, lambda s, i: s.get("/approvals/", headers=reviewer)),
        "tools_read": (size.read_rate, lambda s, i: s.get("/api/v1/tools/", headers=token)),
    }  # fmt: skip
    results: dict[str, list[float]] = {}
    lost: dict[str, int] = {}
    for name, (rate, request) in phases.items():
        results[name], lost[name] = await open_loop(bench.http_url, rate, size.seconds, request)
        await asyncio.sleep(1)
    return results, lost


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    bench.stop_workers()
    fx = prepare(size, bench.seed)
    bench.start_daphne()
    for _ in range(bench.repeat):
        results, lost = asyncio.run(_phases(bench, size, fx))
        for page in _PAGES:
            baseline = "tools_create" if page == "create" else "tools_read"
            base = results[baseline]
            for q in (50, 95, 99):
                yield Sample(f"{page}_p{q}", percentile(results[page], q), percentile(base, q))
            yield Sample(f"{page}_lost", lost[page], lost[baseline])
        for page in ("list", "page", "inbox"):
            yield Sample(f"queries_{page}", fx.queries[page])
            yield Sample(f"growth_{page}", fx.queries[page] - fx.queries[f"{page}_small"])
