"""Pages: server time of the run page, the approvals inbox and the runs list, rendered
in-process (no HTTP server), as many times as ``renders`` after ``warmup`` renders.

Data (created in-process with eager tasks, through the services, so every row a page reads
exists: steps, attempts, checkpoints, audit events, approval requests): one plan run of
``STEPS_PER_RUN`` ``echo`` steps whose arguments (and so results) are a small JSON document
(``ECHO_VALUE``), ``INBOX_PENDING`` runs waiting for a reviewer (an ``echo`` step, then
``send_email``: one full inbox page), and ``LIST_RUNS`` more runs loaded with SQL
(``data.load_runs``), so the runs list shows a full page of 50.

Server time of a page: ``django.test.Client.get`` of its URL with the session of a logged-in
user (an operator for the run page and the runs list, a reviewer for the inbox): the whole
middleware chain, the view, its queries and its template, without daphne and Django's ASGI
handler (about 3 ms more a request on the development machine, benchmarks/README.md). The
figures are the median over the renders of the wall time (``time.perf_counter``) and of the
process's CPU time (``time.process_time``: the Python work alone, less disturbed by the
machine's other load; PostgreSQL's own time is not in it). Targets (issue 12, item 10): run
page and inbox at most 15 ms, runs list at most 10 ms, on the wall-time median.

The inbox at scale (issue 30, item 7) is measured after those, once ``Size.scale_pending``
more requests wait (``send_email`` calls to ``SCALE_RECIPIENTS`` addresses, so identical
requests are grouped as in a real queue): its first page, with its counts per tool and risk
and each line's identical count, at most 150 ms on the wall-time median with 1,000 pending.

A run of any length (issue 30, item 6): the page of a client run of ``HUGE_STEPS`` steps
(tiny: ``Size.huge_steps``) written in bulk (``testsupport.long_runs``: echo calls of
``ECHO_VALUE``, results as JSON text, a model turn every fifth step, a failed step and a tool
error every fifty), measured as the pages above (server time at most 150 ms), the queries it
makes more than the page of a 50-step run made the same way (0: flat in the step count), and
its load in Chromium (``/usr/bin/chromium``, headless, through daphne): the median over the
renders of the navigation's ``loadEventEnd`` (Navigation Timing: from the request to the end
of the load event, so the HTML, its scripts and its layout), at most 1,000 ms; its baseline
is the 50-step run's page loaded the same way in the same repetition.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.data import bench_users, load_runs
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target

NAME = "pages"
STEPS_PER_RUN = 50
INBOX_PENDING = 25
LIST_RUNS = 60
# What each step of the run page echoes: a small customer record, so its arguments and result
# are JSON trees of a few levels, as a real agent's are.
ECHO_VALUE = {
    "customer": {
        "id": "C-1042",
        "name": "Ada Lovelace",
        "tier": "gold",
        "email": "ada@example.com",
    },
    "reservation": {
        "id": "ZFA04Y",
        "flights": [
            {"number": "HAT170", "from": "LAS", "to": "IAH", "date": "2024-05-17"},
            {"number": "HAT112", "from": "IAH", "to": "LAS", "date": "2024-05-21"},
        ],
        "passengers": [{"first": "Ada", "last": "Lovelace", "dob": "1990-12-10"}],
        "insurance": True,
        "total_usd": 412.5,
    },
    "notes": "Customer asked to move the return flight by one day if the fare allows it.",
}


@dataclass(frozen=True)
class Size:
    warmup: int
    renders: int
    scale_pending: int
    huge_steps: int


SIZES = {
    "tiny": Size(warmup=1, renders=3, scale_pending=30, huge_steps=100),
    "full": Size(warmup=10, renders=50, scale_pending=1000, huge_steps=1000),
}
HUGE_STEPS = SIZES["full"].huge_steps
_HUGE_LABEL = f"run page ({HUGE_STEPS:,} steps; tiny: {SIZES['tiny'].huge_steps})"
SCALE_RECIPIENTS = 10

_PAGES = {
    "page": (f"run page ({STEPS_PER_RUN} steps)", 15),
    "inbox": (f"approvals inbox ({INBOX_PENDING} requests)", 15),
    "list": ("runs list (50 runs)", 10),
}

_SCALE_LABEL = "approvals inbox, 1,000 more pending (tiny: 30)"

FIGURES = (
    [
        Figure(f"{page}_wall", f"{label}: server time, median", "ms", (Target("<=", bound),))
        for page, (label, bound) in _PAGES.items()
    ]
    + [
        Figure(f"{page}_cpu", f"{label}: server CPU time, median", "ms")
        for page, (label, _) in _PAGES.items()
    ]
    + [
        Figure(
            "inbox_scale_wall",
            f"{_SCALE_LABEL}: server time, median",
            "ms",
            (Target("<=", 150),),
        ),
        Figure("inbox_scale_cpu", f"{_SCALE_LABEL}: server CPU time, median", "ms"),
        Figure("huge_wall", f"{_HUGE_LABEL}: server time, median", "ms", (Target("<=", 150),)),
        Figure("huge_cpu", f"{_HUGE_LABEL}: server CPU time, median", "ms"),
        Figure(
            "huge_more_queries",
            f"{_HUGE_LABEL}: queries more than for 50 steps",
            "queries",
            (Target("<=", 0),),
        ),
        Figure(
            "huge_browser",
            f"{_HUGE_LABEL}: load in Chromium, median (baseline: 50 steps)",
            "ms",
            (Target("<=", 1000),),
        ),
    ]
)


def _eager_runs(count: int, goal: str, steps: list[dict[str, Any]], actor: Any) -> list[str]:
    """Create and execute ``count`` plan runs in this process (eager tasks); their ids."""
    from agentops.celery import app
    from runs.control.create import run_create

    app.conf.task_always_eager = True
    try:
        return [
            str(run_create(actor=actor, agent="plan", goal=f"{goal} {i}", steps=steps).pk)
            for i in range(count)
        ]
    finally:
        app.conf.task_always_eager = False


@dataclass
class Fixture:
    """The logged-in clients, the URL each page is measured at, and the operator's actor."""

    operator: Any
    reviewer: Any
    urls: dict[str, str]
    actor: Any


def prepare() -> Fixture:
    """Create the data and log the users in."""
    from django.test import Client

    from agentops.actors import Actor

    users = bench_users()
    actor = Actor.for_user(users["operator"])
    load_runs(tag="pages", runs=LIST_RUNS, steps_per_run=STEPS_PER_RUN)
    (run_id,) = _eager_runs(
        1,
        "pages bench",
        [
            {"tool": "echo", "args": {"value": {**ECHO_VALUE, "step": i}}, "rationale": f"step {i}"}
            for i in range(STEPS_PER_RUN)
        ],
        actor,
    )
    _eager_runs(
        INBOX_PENDING,
        "inbox bench",
        [
            {"tool": "echo", "args": {"value": ECHO_VALUE}},
            {
                "tool": "send_email",
                "args": {"to": ["ada@example.com"], "subject": "Your trip", "body": "Moved."},
                "rationale": "The customer asked for written confirmation",
            },
        ],
        actor,
    )
    operator, reviewer = Client(), Client()
    operator.force_login(users["operator"])
    reviewer.force_login(users["reviewer"])
    return Fixture(
        operator=operator,
        reviewer=reviewer,
        urls={"page": f"/runs/{run_id}/", "inbox": "/approvals/", "list": "/"},
        actor=actor,
    )


def prepare_scale(count: int, actor: Any) -> None:
    """Make ``count`` more requests wait, asked for by ``actor``: ``send_email`` calls, one of
    ``SCALE_RECIPIENTS`` recipients each (identical calls come in groups)."""
    for i in range(SCALE_RECIPIENTS):
        args = {"to": [f"customer{i}@example.com"], "subject": "Your trip", "body": "Moved."}
        _eager_runs(
            count // SCALE_RECIPIENTS + (1 if i < count % SCALE_RECIPIENTS else 0),
            f"inbox scale {i}",
            [{"tool": "send_email", "args": args, "rationale": "Confirm the change"}],
            actor,
        )


def measure(client: Any, url: str, warmup: int, renders: int) -> tuple[float, float]:
    """Median wall and CPU time (ms) of ``renders`` GETs of ``url`` after ``warmup`` ones.

    Raises:
        RuntimeError: a response was not 200.
    """
    walls: list[float] = []
    cpus: list[float] = []
    for i in range(warmup + renders):
        wall, cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if response.status_code != 200:
            raise RuntimeError(f"GET {url}: {response.status_code}")
        if i >= warmup:
            walls.append(wall * 1000)
            cpus.append(cpu * 1000)
    return statistics.median(walls), statistics.median(cpus)


def long_run(actor: Any, steps: int) -> str:
    """A client run of ``steps`` steps written in bulk (``testsupport.long_runs``); its id."""
    from datetime import UTC, datetime

    from runs.control.create import run_create
    from testsupport.long_runs import add_steps

    run = run_create(actor=actor, agent="client", goal=f"pages bench, {steps} steps")
    add_steps(run=run, count=steps, value=ECHO_VALUE, start=datetime(2026, 5, 1, tzinfo=UTC))
    return str(run.pk)


def queries(client: Any, url: str) -> int:
    """How many queries a GET of ``url`` makes (after one GET to warm the caches)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return len(captured)


def browser_loads(bench: Bench, urls: list[str], warmup: int, renders: int) -> list[float]:
    """The median load time (ms, Navigation Timing's ``loadEventEnd``) of each of ``urls`` in
    headless Chromium through the benchmark's daphne, logged in as the operator, over
    ``renders`` loads after ``warmup`` ones, the URLs taking turns."""
    from playwright.sync_api import sync_playwright

    from benchmarks.data import BENCH_USER_PASSWORD

    bench.start_daphne()
    times: list[list[float]] = [[] for _ in urls]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(base_url=bench.http_url, viewport={"width": 1440, "height": 900})
        page.goto("/accounts/login/")
        page.fill("input[name=username]", "bench-operator")
        page.fill("input[name=password]", BENCH_USER_PASSWORD)
        with page.expect_navigation():
            page.click("button[type=submit]")
        for i in range(warmup + renders):
            for url, found in zip(urls, times, strict=True):
                page.goto(url, wait_until="load")
                if i >= warmup:
                    found.append(
                        page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
                    )
        browser.close()
    return [statistics.median(found) for found in times]


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    bench.stop_workers()
    fx = prepare()
    for _ in range(bench.repeat):
        for page in _PAGES:
            client = fx.reviewer if page == "inbox" else fx.operator
            wall, cpu = measure(client, fx.urls[page], size.warmup, size.renders)
            yield Sample(f"{page}_wall", wall)
            yield Sample(f"{page}_cpu", cpu)
    prepare_scale(size.scale_pending, fx.actor)
    for _ in range(bench.repeat):
        wall, cpu = measure(fx.reviewer, "/approvals/", size.warmup, size.renders)
        yield Sample("inbox_scale_wall", wall)
        yield Sample("inbox_scale_cpu", cpu)
    huge = f"/runs/{long_run(fx.actor, size.huge_steps)}/"
    short = f"/runs/{long_run(fx.actor, STEPS_PER_RUN)}/"
    for _ in range(bench.repeat):
        wall, cpu = measure(fx.operator, huge, size.warmup, size.renders)
        yield Sample("huge_wall", wall)
        yield Sample("huge_cpu", cpu)
        yield Sample("huge_more_queries", queries(fx.operator, huge) - queries(fx.operator, short))
        loads = browser_loads(bench, [huge, short], min(size.warmup, 3), min(size.renders, 10))
        yield Sample("huge_browser", loads[0], baseline=loads[1])
