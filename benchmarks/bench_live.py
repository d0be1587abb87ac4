"""Live-update latency: a transition's commit → the message received by WebSocket clients.

``clients`` WebSocket clients (aiohttp, in this process) follow ``/ws/runs/`` on one daphne
process with an operator's API token; two workers execute ``runs`` one-step plan runs created
one every ``interval`` seconds. A latency is the client's receive time - the event's
``created_at`` (same clock; ``created_at`` is taken inside the transaction, before its commit,
so the figure slightly overstates commit → receive). Once the runs succeeded, every client
should have received every audit event of those runs in the database: each one still missing
once no client has received anything for ``STALL_SECONDS`` counts as lost (channels-redis keeps
at most ``capacity``, 100, undelivered messages per consumer and drops the oldest beyond that,
so a consumer that falls behind loses messages). The baseline sends as many messages of the
same shape straight to the channel layer's ``runs`` group from this process, on the same
schedule, and measures send → receive the same way.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from benchmarks.bench_throughput import create_runs, wait_runs
from benchmarks.harness import Bench, Figure, Sample, Target, bench_users, percentile

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
    """One WebSocket client: for every event id it received, the latency in ms."""

    received: dict[int, float] = field(default_factory=dict)


async def _follow(ws: aiohttp.ClientWebSocketResponse, client: Client) -> None:
    async for message in ws:
        now = time.time()
        if message.type != aiohttp.WSMsgType.TEXT:
            break
        event = json.loads(message.data)["event"]
        client.received[event["id"]] = (now - _epoch(event["created_at"])) * 1000


async def _connect(session: aiohttp.ClientSession, url: str, clients: list[Client]) -> list[Any]:
    sockets = []
    for start in range(0, len(clients), 50):
        sockets += await asyncio.gather(
            *(session.ws_connect(url, heartbeat=None) for _ in clients[start : start + 50])
        )
    return sockets


def _tally(clients: list[Client], expected: set[int]) -> tuple[list[float], int]:
    latencies = [c.received[i] for c in clients for i in expected if i in c.received]
    lost = sum(len(expected - c.received.keys()) for c in clients)
    return latencies, lost


async def _settle(clients: list[Client], expected: set[int]) -> None:
    """Return once every client has every expected message, or none has received anything
    for ``STALL_SECONDS`` (what is missing then was dropped), at most ``SETTLE_SECONDS``."""
    deadline = time.monotonic() + SETTLE_SECONDS
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if all(expected <= c.received.keys() for c in clients):
            return
        total = sum(len(c.received) for c in clients)
        if total != seen:
            seen, quiet_since = total, time.monotonic()
        elif time.monotonic() - quiet_since > STALL_SECONDS:
            return
        await asyncio.sleep(0.1)


async def _app_phase(size: Size, clients: list[Client]) -> tuple[list[float], int]:
    from audit.models import AuditEvent

    ids: list[str] = []
    began = time.monotonic()
    for i in range(size.runs):
        await asyncio.sleep(max(0.0, began + i * size.interval - time.monotonic()))
        ids += await asyncio.to_thread(create_runs, 1, 1)
    await asyncio.to_thread(wait_runs, ids, "succeeded", 60 + size.runs)
    expected = set(
        await asyncio.to_thread(
            lambda: list(AuditEvent.objects.filter(run_id__in=ids).values_list("id", flat=True))
        )
    )
    await _settle(clients, expected)
    return _tally(clients, expected)


async def _baseline_phase(
    size: Size, clients: list[Client], per_run: int
) -> tuple[list[float], int]:
    from channels.layers import get_channel_layer

    from audit.live import RUNS_GROUP

    layer = get_channel_layer()
    assert layer is not None
    expected: set[int] = set()
    began = time.monotonic()
    for i in range(size.runs):
        await asyncio.sleep(max(0.0, began + i * size.interval - time.monotonic()))
        for _ in range(per_run):
            ping = -time.time_ns()
            expected.add(ping)
            event = {"id": ping, "verb": PING_VERB, "created_at": datetime.now(UTC).isoformat()}
            await layer.group_send(RUNS_GROUP, {"type": "audit.event", "event": event})
    await _settle(clients, expected)
    return _tally(clients, expected)


async def _measure(bench: Bench, size: Size, count: int, token: str) -> list[Sample]:
    url = f"ws://127.0.0.1:{bench.daphne_port}/ws/runs/?token={token}"
    clients = [Client() for _ in range(count)]
    samples = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        sockets = await _connect(session, url, clients)
        readers = [
            asyncio.create_task(_follow(ws, c)) for ws, c in zip(sockets, clients, strict=True)
        ]
        await asyncio.sleep(1)
        for _ in range(bench.repeat):
            latencies, lost = await _app_phase(size, clients)
            per_run = max(1, round(len(latencies) / count / size.runs)) if latencies else 7
            base, base_lost = await _baseline_phase(size, clients, per_run)
            samples += [
                Sample(f"p50_{count}", percentile(latencies, 50), percentile(base, 50)),
                Sample(f"p99_{count}", percentile(latencies, 99), percentile(base, 99)),
                Sample(f"lost_{count}", lost, base_lost),
            ]
            for c in clients:
                c.received.clear()
        for ws in sockets:
            await ws.close()
        await asyncio.gather(*readers, return_exceptions=True)
    return samples


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    token = bench_users()["operator_token"]
    bench.start_workers(2)
    bench.start_daphne()
    for count in size.clients:
        yield from asyncio.run(_measure(bench, size, count, token))
