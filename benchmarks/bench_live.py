"""Live-update latency: a transition's commit → the message received by WebSocket clients.

``clients`` WebSocket clients (aiohttp, in this process) follow the timelines of ``runs`` runs,
``clients / runs`` clients on each run's stream ``/ws/runs/<id>/`` (operators watching runs),
through the daphne processes (``--web-processes``), with an operator's API token. The runs
are client runs, created and started (idle, waiting for their client) before the clients
connect; then, one run every ``interval`` seconds, this process appends an ``echo`` step to a
run and completes it, as a client app would, and two workers execute them: six audit events a
run (step created, queued, running, succeeded; run completed by its client, succeeded). A
latency is the client's receive time - the event's ``created_at`` (same clock; ``created_at``
is taken inside the transaction, before its commit, so the figure slightly overstates commit
→ receive). Once the runs succeeded, every client should have received every event of its run
committed after it connected: each one still missing once no client has received anything
for ``STALL_SECONDS`` counts as lost (channels-redis keeps at most ``capacity``, 100,
undelivered messages per consumer and drops the oldest beyond that, so a consumer that falls
behind loses messages). The baseline sends as many events straight to each run's channel-layer
group from this process, on the same schedule, one message per event (the app sends one per
transaction), and measures send → receive the same way.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp

from benchmarks.bench_throughput import wait_runs
from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target
from testsupport.statistics import percentile

T = TypeVar("T")

NAME = "live"
STALL_SECONDS = 3.0
SETTLE_SECONDS = 120.0
PING_VERB = "bench.ping"


@dataclass(frozen=True)
class Size:
    clients: tuple[int, ...]
    runs: int
    interval: float


SIZES = {
    "tiny": Size(clients=(3, 5), runs=3, interval=0.1),
    "full": Size(clients=(100, 500), runs=50, interval=0.25),
}


def figures_for(clients: int) -> list[Figure]:
    """The rows of one client count (targets at 500 clients and more, as in the issue)."""
    targets = clients >= 500
    return [
        Figure(f"p50_{clients}", f"commit → received, {clients} clients, p50", "ms",
               (Target("<=", 20),) if targets else ()),
        Figure(f"p99_{clients}", f"commit → received, {clients} clients, p99", "ms",
               (Target("<=", 100),) if targets else ()),
        Figure(f"lost_{clients}", f"messages never received, {clients} clients", "messages",
               (Target("<=", 0),)),
    ]  # fmt: skip


FIGURES = [f for n in SIZES["full"].clients for f in figures_for(n)] + [
    f for n in SIZES["tiny"].clients for f in figures_for(n)
]


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass
class Client:
    """One WebSocket client following ``run_id``: for every event id it received, the
    latency in ms."""

    run_id: str
    received: dict[int, float] = field(default_factory=dict)


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread, whose database connections are closed when it returns:
    an ended thread's connection stays open until the garbage collector finds its wrapper,
    and the gateway benchmark waits for every connection to the database to end."""

    from django.db import connections

    def call() -> T:
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return await asyncio.to_thread(call)


async def _follow(ws: aiohttp.ClientWebSocketResponse, client: Client) -> None:
    async for message in ws:
        now = time.time()
        if message.type != aiohttp.WSMsgType.TEXT:
            break
        event = json.loads(message.data)["event"]
        client.received[event["id"]] = (now - _epoch(event["created_at"])) * 1000


async def _connect(
    session: aiohttp.ClientSession, url: str, clients: list[Client], token: str
) -> list[Any]:
    sockets = []
    for start in range(0, len(clients), 50):
        sockets += await asyncio.gather(
            *(
                session.ws_connect(f"{url}{c.run_id}/?token={token}", heartbeat=None)
                for c in clients[start : start + 50]
            )
        )
    return sockets


Expected = dict[str, set[int]]


def _tally(clients: list[Client], expected: Expected) -> tuple[list[float], int]:
    latencies = [c.received[i] for c in clients for i in expected[c.run_id] if i in c.received]
    lost = sum(len(expected[c.run_id] - c.received.keys()) for c in clients)
    return latencies, lost


async def _settle(clients: list[Client], expected: Expected) -> None:
    """Return once every client has every expected message, or none has received anything
    for ``STALL_SECONDS`` (what is missing then was dropped), at most ``SETTLE_SECONDS``."""
    deadline = time.monotonic() + SETTLE_SECONDS
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if all(expected[c.run_id] <= c.received.keys() for c in clients):
            return
        total = sum(len(c.received) for c in clients)
        if total != seen:
            seen, quiet_since = total, time.monotonic()
        elif time.monotonic() - quiet_since > STALL_SECONDS:
            return
        await asyncio.sleep(0.1)


def _idle_client_runs(count: int, operator: Any) -> list[str]:
    """Create ``count`` client runs and wait until each is running, idle for its client."""
    from agentops.actors import Actor
    from runs.control.create import run_create

    actor = Actor.for_user(operator, via_api=True)
    ids = [str(run_create(actor=actor, agent="client", goal=f"live {i}").pk) for i in range(count)]
    wait_runs(ids, "running", timeout=60 + count)
    return ids


def _drive(run_id: str, operator: Any) -> None:
    """What a client app does: append one step to the run, then say it is complete."""
    from agentops.actors import Actor
    from runs.control.create import step_append
    from runs.control.lifecycle import run_complete

    actor = Actor.for_user(operator, via_api=True)
    step_append(actor=actor, run_id=uuid.UUID(run_id), tool="echo", args={"value": 1})
    run_complete(actor=actor, run_id=uuid.UUID(run_id))


async def _app_phase(
    size: Size, clients: list[Client], ids: list[str], operator: Any
) -> tuple[list[float], int]:
    from audit.models import AuditEvent

    def last_event_id() -> int:
        return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0

    after = await in_thread(last_event_id)
    began = time.monotonic()
    for i, run_id in enumerate(ids):
        await asyncio.sleep(max(0.0, began + i * size.interval - time.monotonic()))
        await in_thread(_drive, run_id, operator)
    await in_thread(wait_runs, ids, "succeeded", 60 + size.runs)

    def committed() -> Expected:
        expected: Expected = {run_id: set() for run_id in ids}
        events = AuditEvent.objects.filter(run_id__in=ids, id__gt=after)
        for run_id, event_id in events.values_list("run_id", "id"):
            expected[str(run_id)].add(event_id)
        return expected

    expected = await in_thread(committed)
    await _settle(clients, expected)
    return _tally(clients, expected)


async def _baseline_phase(
    size: Size, clients: list[Client], ids: list[str], per_run: int
) -> tuple[list[float], int]:
    from channels.layers import get_channel_layer

    from audit.live import run_group

    layer = get_channel_layer()
    assert layer is not None
    expected: Expected = {run_id: set() for run_id in ids}
    began = time.monotonic()
    for i, run_id in enumerate(ids):
        await asyncio.sleep(max(0.0, began + i * size.interval - time.monotonic()))
        for _ in range(per_run):
            ping = -time.time_ns()
            expected[run_id].add(ping)
            event = {"id": ping, "verb": PING_VERB, "created_at": datetime.now(UTC).isoformat()}
            message = {"type": "audit.events", "events": [event]}
            await layer.group_send(run_group(run_id), message)
    await _settle(clients, expected)
    return _tally(clients, expected)


async def _measure(bench: Bench, size: Size, count: int, users: dict[str, Any]) -> list[Sample]:
    url = f"ws://127.0.0.1:{bench.daphne_port}/ws/runs/"
    samples = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(bench.repeat):
            ids = await in_thread(_idle_client_runs, size.runs, users["operator"])
            clients = [Client(run_id=ids[i % len(ids)]) for i in range(count)]
            sockets = await _connect(session, url, clients, users["operator_token"])
            readers = [
                asyncio.create_task(_follow(ws, c)) for ws, c in zip(sockets, clients, strict=True)
            ]
            await asyncio.sleep(1)
            latencies, lost = await _app_phase(size, clients, ids, users["operator"])
            per_run = round(len(latencies) / count) if latencies else 6
            for c in clients:
                c.received.clear()
            base, base_lost = await _baseline_phase(size, clients, ids, max(1, per_run))
            samples += [
                Sample(f"p50_{count}", percentile(latencies, 50), percentile(base, 50)),
                Sample(f"p99_{count}", percentile(latencies, 99), percentile(base, 99)),
                Sample(f"lost_{count}", lost, base_lost),
            ]
            for ws in sockets:
                await ws.close()
            await asyncio.gather(*readers, return_exceptions=True)
    return samples


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    users = bench_users()
    bench.start_workers(2)
    bench.start_daphne()
    for count in size.clients:
        yield from asyncio.run(_measure(bench, size, count, users))
