"""Conversation: what appending a message costs as a run's conversation grows, and reading the
last 50 messages of a long one (issue 31, part 4).

Three client runs are filled through ``runs.control.conversation.run_messages_append`` (turns
of ``FILL_TURN`` messages of about 200 characters) to ``SIZES[...].lengths`` messages: 10,
1,000 and 10,000 at full size. Then ``appends`` single-message appends go to the three in
turn (so the machine's drift over the measurement touches the three alike), each timed from
the call to its commit (``time.perf_counter``); the figure is the median per run. Automatic
compaction is off (``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` = 0): the figure is the append alone.
Target: the three medians within 1.5x of each other (``spread``: largest / smallest).

The baseline of each append figure is the former design, measured in the same repetition on
a scratch table: the conversation one JSON list in the run's row, read under lock, extended
and written back whole (``UPDATE ... SET conversation = ...``).

Reading: ``GET /api/v1/runs/{id}/messages/?last=50`` of the longest run with an operator's
token, through ``django.test.Client`` (the middleware chain, authentication, the permission
check, the view, its queries and the serializer; no HTTP server, as the pages benchmark
measures server time), median over ``reads`` requests after ``warmup`` (110 in all: under
the API's 200 requests a second per user). Target: at most 5 ms.
The query alone (``runs.selectors.messages_before``) is reported too.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target

NAME = "conversation"
FILL_TURN = 200
MESSAGE = {
    "role": "user",
    "content": "I need to move my return flight from Houston to Las Vegas by one day, "
    "keeping the same cabin; the reservation is ZFA04Y and I can pay a fare difference.",
}
_SCRATCH = "bench_conversation_json"


@dataclass(frozen=True)
class Size:
    lengths: tuple[int, int, int]
    appends: int
    warmup: int
    reads: int


SIZES = {
    "tiny": Size(lengths=(10, 100, 1_000), appends=5, warmup=1, reads=5),
    "full": Size(lengths=(10, 1_000, 10_000), appends=100, warmup=10, reads=100),
}

_LENGTHS = ("short", "medium", "long")
FIGURES = [
    Figure(
        f"append_{name}",
        f"append p50, {name} conversation (full: {length:,} messages; baseline: one JSON list)",
        "ms",
    )
    for name, length in zip(_LENGTHS, SIZES["full"].lengths, strict=True)
] + [
    Figure("spread", "append p50: largest / smallest of the three", "x", (Target("<=", 1.5),)),
    Figure(
        "read_last_50",
        "read the last 50 of the long conversation: server time (API GET), median",
        "ms",
        (Target("<=", 5),),
    ),
    Figure("read_query", "read the last 50: the query alone, median", "ms"),
]


def _filled(actor: Any, length: int) -> str:
    """A client run of ``length`` messages; its id."""
    from runs.control.conversation import run_messages_append
    from runs.control.create import run_create

    run = run_create(actor=actor, agent="client", goal=f"conversation of {length}")
    for start in range(0, length, FILL_TURN):
        turn = [MESSAGE] * min(FILL_TURN, length - start)
        run_messages_append(actor=actor, run_id=run.pk, messages=turn)
    return str(run.pk)


def _json_list_append(key: int) -> None:
    """The former design's append: the whole list read under lock, extended, written back."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT conversation FROM {_SCRATCH} WHERE id = %s FOR UPDATE",  # noqa: S608
            [key],
        )
        (stored,) = cursor.fetchone()
        messages = json.loads(stored) if isinstance(stored, str) else stored
        cursor.execute(
            f"UPDATE {_SCRATCH} SET conversation = %s WHERE id = %s",  # noqa: S608
            [json.dumps([*messages, MESSAGE]), key],
        )


def _json_lists(lengths: tuple[int, ...]) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_SCRATCH}")
        cursor.execute(f"CREATE TABLE {_SCRATCH} (id int PRIMARY KEY, conversation jsonb)")
        for key, length in enumerate(lengths):
            cursor.execute(
                f"INSERT INTO {_SCRATCH} VALUES (%s, %s)",  # noqa: S608
                [key, json.dumps([MESSAGE] * length)],
            )


def _timed(call: Any) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


def appends(actor: Any, run_ids: list[str], size: Size) -> tuple[list[float], list[float]]:
    """Median append time (ms) of each run, and of each JSON list of the same length."""
    from runs.control.conversation import run_messages_append

    times: list[list[float]] = [[] for _ in run_ids]
    for _ in range(size.appends):
        for i, run_id in enumerate(run_ids):
            times[i].append(
                _timed(
                    lambda run_id=run_id: run_messages_append(
                        actor=actor, run_id=run_id, messages=[MESSAGE]
                    )
                )
            )
    # After the appends measured, not between them: rewriting a list of 10,000 messages
    # leaves Python's allocator and collector work that would land on the next append timed.
    _json_lists(size.lengths)
    baseline: list[list[float]] = [[] for _ in run_ids]
    for _ in range(size.appends):
        for i in range(len(run_ids)):
            baseline[i].append(_timed(lambda i=i: _json_list_append(i)))
    return [statistics.median(t) for t in times], [statistics.median(t) for t in baseline]


def reads(token: str, run_id: str, size: Size) -> tuple[float, float]:
    """Median server time (ms) of the API read of the last 50, and of its query alone.

    Raises:
        RuntimeError: the API did not answer 200 with 50 messages.
    """
    from django.test import Client

    from runs.selectors import messages_before

    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    url = f"/api/v1/runs/{run_id}/messages/?last=50"
    served: list[float] = []
    queried: list[float] = []
    for i in range(size.warmup + size.reads):
        began = time.perf_counter()
        response = client.get(url)
        took = (time.perf_counter() - began) * 1000
        if response.status_code != 200 or len(response.json()["messages"]) != 50:
            raise RuntimeError(f"GET {url}: {response.status_code}")
        end = response.json()["message_count"]
        query = _timed(lambda end=end: messages_before(run_id=run_id, end=end, last=50))
        if i >= size.warmup:
            served.append(took)
            queried.append(query)
    return statistics.median(served), statistics.median(queried)


def run(bench: Bench) -> Iterator[Sample]:
    from django.test import override_settings

    from agentops.actors import Actor

    size = SIZES[bench.size]
    bench.stop_workers()
    users = bench_users()
    actor = Actor.for_user(users["operator"], via_api=True)
    with override_settings(AGENTOPS_CONTEXT_TOKEN_THRESHOLD=0):
        for _ in range(bench.repeat):
            run_ids = [_filled(actor, length) for length in size.lengths]
            medians, baselines = appends(actor, run_ids, size)
            for name, median, baseline in zip(_LENGTHS, medians, baselines, strict=True):
                yield Sample(f"append_{name}", median, baseline)
            yield Sample("spread", max(medians) / min(medians))
            served, queried = reads(users["operator_token"], run_ids[-1], size)
            yield Sample("read_last_50", served)
            yield Sample("read_query", queried)
