"""MCP gateway overhead: a low-risk tool call through ``/mcp/<upstream>/`` against the same
call made straight to the upstream.

The upstream is ``benchmarks.mcp_upstream`` over stdio (one tool, ``noop``, ``readOnlyHint``:
low risk, no approval), registered with ``gateway.services.upstream_register``. This process
opens two MCP clients of the ``mcp`` SDK, both speaking the handshake (``mode="legacy"``):
*direct*, the upstream started by this process exactly as the gateway starts it
(``gateway.upstream.client_for``: same command, environment and directory); and *gateway*,
streamable HTTP to one daphne process serving the project (``Authorization: Bearer`` an
operator's API token), which forwards to its own stdio connection to the upstream. Then
``warmup`` + ``calls`` calls of ``noop`` go out one at a time, alternately through each client
(the first of each pair alternates too), so that both see the same machine; only the last
``calls`` of each are measured (the first ones start the gateway's upstream, create the
session's run and warm caches). A latency is the wall time of ``Client.call_tool`` in this
process. Added = the gateway's p50 - the direct p50 of the same repetition. The session is one
run whose steps are the calls, so ``warmup + calls`` stays below the default step limit (500).

One daphne process, not ``--web-processes``: an MCP session lives in the memory of the process
that opened it (the SDK's session manager), so connections spread over several processes by the
kernel could reach one that does not know the session. It is started for each repetition and
stopped after it, so that the PostgreSQL transactions it committed can be read (as the
throughput benchmark reads the workers'): ``pg_stat_database.xact_commit`` of the benchmark
database over daphne's life, divided by the calls made through it (warm-up included); that
also counts the session's own set-up (its requests' authentication, the run's creation) and
daphne's start, a handful of transactions in all, and every statement Django runs outside a
transaction (each is one). No Celery worker runs: a low-risk client step is moved on in the
transaction that appends it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.mcp_upstream import TOOL
from benchmarks.table import Figure, Sample, Target
from testsupport.statistics import percentile

NAME = "gateway"
UPSTREAM = "bench-noop"


@dataclass(frozen=True)
class Size:
    warmup: int
    calls: int


SIZES = {"tiny": Size(warmup=5, calls=20), "full": Size(warmup=50, calls=400)}

FIGURES = [
    Figure("direct_p50", "read-only tool call straight to the upstream (stdio), p50", "ms"),
    Figure("direct_p95", "read-only tool call straight to the upstream (stdio), p95", "ms"),
    Figure("gateway_p50", "same call through the gateway (baseline: direct), p50", "ms"),
    Figure("gateway_p95", "same call through the gateway (baseline: direct), p95", "ms"),
    Figure("added_p50", "added by the gateway, p50 (gateway - direct)", "ms", (Target("<=", 5),)),
    Figure("added_p95", "added by the gateway, p95 (gateway - direct)", "ms"),
    Figure("commits", "PostgreSQL transactions per call through the gateway", "commits"),
]


def register_upstream() -> Any:
    """The benchmark's upstream (re-)registered, its tools fetched."""
    from gateway.services import upstream_refresh_tools, upstream_register

    upstream = upstream_register(
        name=UPSTREAM, command=f"{sys.executable} -m benchmarks.mcp_upstream"
    )
    upstream_refresh_tools(upstream)
    return upstream


async def _timed(client: Any, i: int) -> float:
    began = time.perf_counter()
    result = await client.call_tool(TOOL, {"i": i})
    elapsed = (time.perf_counter() - began) * 1000
    if result.is_error:
        raise RuntimeError(f"call {i} failed: {result.content}")
    return elapsed


async def latencies(
    bench: Bench, size: Size, spec: Any, token: str
) -> tuple[list[float], list[float]]:
    """(direct, gateway) latencies in ms of the measured calls, made alternately."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from gateway.upstream import client_for

    url = f"{bench.http_url}/mcp/{UPSTREAM}/"
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    direct: list[float] = []
    through: list[float] = []
    async with (
        client_for(spec) as straight,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as gateway,
    ):
        for i in range(size.warmup + size.calls):
            if i % 2:
                d, g = await _timed(straight, i), await _timed(gateway, i)
            else:
                g, d = await _timed(gateway, i), await _timed(straight, i)
            if i >= size.warmup:
                direct.append(d)
                through.append(g)
    return direct, through


def run(bench: Bench) -> Iterator[Sample]:
    from django.db import connection

    from gateway.upstream import UpstreamSpec

    size = SIZES[bench.size]
    bench.stop_workers()
    bench.stop_daphne()
    token = bench_users()["operator_token"]
    spec = UpstreamSpec.of(register_upstream())
    processes = bench.web_processes
    bench.web_processes = 1
    try:
        for _ in range(bench.repeat):
            connection.close()
            before = bench.xact_commits()
            bench.start_daphne()
            try:
                direct, through = asyncio.run(latencies(bench, size, spec, token))
            finally:
                bench.stop_daphne()
            commits = bench.xact_commits() - before
            for q in (50, 95):
                d, g = percentile(direct, q), percentile(through, q)
                yield Sample(f"direct_p{q}", d)
                yield Sample(f"gateway_p{q}", g, d)
                yield Sample(f"added_p{q}", g - d)
            yield Sample("commits", commits / (size.warmup + size.calls))
    finally:
        bench.web_processes = processes
