"""LangGraph checkpoints: ``put`` and ``get_tuple`` through the SDK's ``AgentOpsSaver`` against
``langgraph-checkpoint-postgres``'s ``PostgresSaver`` on the same PostgreSQL database, in the
same run (issue 34).

Both savers get the same work, interleaved call by call so the machine's drift touches both
alike: ``checkpoints`` checkpoints on one thread per saver, each after the previous one (its
parent), each changing one channel (``messages``: ``MESSAGES`` chat messages of about 150
characters, as a short conversation) and keeping another (``profile``); after each ``put``, a
``get_tuple`` of the thread's latest checkpoint (what a graph reads when a turn starts). Each
call is timed from the call to its return (``time.perf_counter``); the first ``warmup`` of
each are left out; the figures are medians (p50).

``AgentOpsSaver`` goes over HTTP to the benchmark's daphne processes (an operator's token; the
REST API, authentication, permission check, the session lock, the audit event, the rows);
``PostgresSaver`` talks to PostgreSQL directly over one connection (autocommit, as its
``from_conn_string`` opens it). Target: each figure at most 2x PostgresSaver's.

The store rows do the same for long-term memory: ``AgentOpsStore`` (a memory item per put:
row lock, version row, audit event) against ``langgraph-checkpoint-postgres``'s
``PostgresStore`` on the same database, interleaved: ``checkpoints`` puts of one item per
store (a value of about 300 characters, each put a new key of one namespace), each followed
by a ``get`` of it. No target: issue 34 sets none for the store.
"""

from __future__ import annotations

import functools
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target

NAME = "langgraph"
MESSAGES = 6
TURN = {
    "role": "user",
    "content": "I need to move my return flight from Houston to Las Vegas by one day, "
    "keeping the same cabin; the reservation is ZFA04Y.",
}


@dataclass(frozen=True)
class Size:
    checkpoints: int
    warmup: int


SIZES = {"tiny": Size(checkpoints=12, warmup=2), "full": Size(checkpoints=300, warmup=20)}

FIGURES = [
    Figure(
        "put_p50",
        "put p50 through AgentOpsSaver (baseline: PostgresSaver, same database)",
        "ms",
        (Target("<=", 2, on="ratio"),),
    ),
    Figure(
        "get_tuple_p50",
        "get_tuple p50 of the latest checkpoint (baseline: PostgresSaver, same database)",
        "ms",
        (Target("<=", 2, on="ratio"),),
    ),
    Figure("store_put_p50", "store put p50 through AgentOpsStore (baseline: PostgresStore)", "ms"),
    Figure("store_get_p50", "store get p50 through AgentOpsStore (baseline: PostgresStore)", "ms"),
]


class _Thread:
    """One saver's thread: puts checkpoints one after the other and reads the latest."""

    def __init__(self, saver: Any) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.saver = saver
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": f"bench-{uuid.uuid4()}", "checkpoint_ns": ""}
        }
        self.checkpoint = empty_checkpoint()
        self.step = 0

    def put(self) -> None:
        from langgraph.checkpoint.base.id import uuid6

        self.step += 1
        version = self.saver.get_next_version(
            self.checkpoint["channel_versions"].get("messages"), None
        )
        values = {"messages": [TURN] * MESSAGES, "profile": {"tier": "gold", "step": 0}}
        versions = {**self.checkpoint["channel_versions"], "messages": version}
        new = {"messages": version}
        if self.step == 1:
            versions["profile"] = new["profile"] = self.saver.get_next_version(None, None)
        self.checkpoint = {
            **self.checkpoint,
            "id": str(uuid6(clock_seq=self.step)),
            "channel_values": values,
            "channel_versions": versions,
        }
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        self.config = self.saver.put(self.config, self.checkpoint, metadata, new)

    def get_tuple(self) -> None:
        latest = {"configurable": {**self.config["configurable"]}}
        latest["configurable"].pop("checkpoint_id")
        if self.saver.get_tuple(latest) is None:
            raise RuntimeError("the latest checkpoint was not found")


def _timed(call: Callable[[], None]) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


def measure(agentops: Any, postgres: Any, size: Size) -> dict[str, list[float]]:
    """Each call's time (ms) by ``<saver>_<call>``, the warm-up left out."""
    threads = {"agentops": _Thread(agentops), "postgres": _Thread(postgres)}
    times: dict[str, list[float]] = {f"{s}_{c}": [] for s in threads for c in ("put", "get")}
    for i in range(size.checkpoints):
        for name, thread in threads.items():
            put, get = _timed(thread.put), _timed(thread.get_tuple)
            if i >= size.warmup:
                times[f"{name}_put"].append(put)
                times[f"{name}_get"].append(get)
    return times


def measure_stores(agentops: Any, postgres: Any, size: Size) -> dict[str, list[float]]:
    """Each store call's time (ms) by ``<store>_<call>``, the warm-up left out."""
    stores = {"agentops": agentops, "postgres": postgres}
    namespace = ("bench", f"user-{uuid.uuid4()}", "memories")
    value = {"fact": TURN["content"], "source": "chat", "turns": [TURN["content"][:100]] * 2}
    times: dict[str, list[float]] = {f"{s}_{c}": [] for s in stores for c in ("put", "get")}
    for i in range(size.checkpoints):
        for name, store in stores.items():
            key = f"fact-{i}"
            put = _timed(functools.partial(store.put, namespace, key, value))
            get = _timed(functools.partial(store.get, namespace, key))
            if i >= size.warmup:
                times[f"{name}_put"].append(put)
                times[f"{name}_get"].append(get)
    return times


def run(bench: Bench) -> Iterator[Sample]:
    from agentops_client import Client
    from agentops_client.langgraph import AgentOpsSaver, AgentOpsStore
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    size = SIZES[bench.size]
    bench.stop_workers()
    bench.start_daphne()
    token = bench_users()["operator_token"]
    with (
        Client(bench.http_url, token, websocket=False) as client,
        PostgresSaver.from_conn_string(bench.database_url) as postgres,
        PostgresStore.from_conn_string(bench.database_url) as postgres_store,
    ):
        postgres.setup()
        postgres_store.setup()
        for _ in range(bench.repeat):
            times = measure(AgentOpsSaver(client), postgres, size)
            p50 = {key: statistics.median(values) for key, values in times.items()}
            yield Sample("put_p50", p50["agentops_put"], p50["postgres_put"])
            yield Sample("get_tuple_p50", p50["agentops_get"], p50["postgres_get"])
            times = measure_stores(AgentOpsStore(client), postgres_store, size)
            p50 = {key: statistics.median(values) for key, values in times.items()}
            yield Sample("store_put_p50", p50["agentops_put"], p50["postgres_put"])
            yield Sample("store_get_p50", p50["agentops_get"], p50["postgres_get"])
