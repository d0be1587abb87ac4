"""Memory store: search and put latency over 1,000,000 items in 1,000 namespaces (issue 33).

The store is loaded once with SQL (``_LOAD``, the full-text index built after it): ``items``
items spread evenly over ``namespaces`` namespaces ``("bench", "user:<n>", "facts")`` of the
default project, each with a text of 8 words drawn (by fixed strides, so runs repeat) from a
vocabulary of 2,000 made-up words, its ``tsvector`` and a JSON value; then ANALYZE.

Each repetition measures, through ``django.test.Client`` with an operator's API token (the
middleware chain, authentication, the view, its queries and the serializer; no HTTP server,
as the pages benchmark measures server time):

- **search**: ``searches`` requests ``POST /api/v1/memory/search/`` with one user's
  namespace prefix (``["bench", "user:<n>"]``, a random user) and a full-text ``query`` of
  one vocabulary word (random), limit 10: p50 and p95 in ms. Target (the issue): p95 at most
  20 ms. Baseline: the same search as one hand-written SQL statement on a cursor (prefix
  ``LIKE``, ``@@ websearch_to_tsquery``, ``ORDER BY ts_rank``), p95 of the same number.
- **put**: ``puts`` requests ``PUT /api/v1/memory/items/`` writing new keys in random users'
  namespaces (each a locked upsert, a kept version and an audit event with its chain head):
  p50 in ms. Target: at most 5 ms. Baseline: one ``INSERT ... ON CONFLICT DO UPDATE`` of
  the item alone, in its own transaction, p50.
- **floor**: as many ``GET /api/v1/memory/items/`` of keys that do not exist (one indexed
  lookup that finds nothing, answered 404): p50 in ms. Every request pays this much (the
  middleware chain, the token and throttle checks, the project's lookup, the error answer)
  before its own work, so it bounds what any API call can reach on the host.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target
from testsupport.statistics import percentile

NAME = "memory"
VOCABULARY = 2_000
WORDS_PER_ITEM = 8


@dataclass(frozen=True)
class Size:
    items: int
    namespaces: int
    searches: int
    puts: int


SIZES = {
    "tiny": Size(items=10_000, namespaces=100, searches=20, puts=20),
    "full": Size(items=1_000_000, namespaces=1_000, searches=300, puts=300),
}

FIGURES = [
    Figure("search_p50", "search p50 (prefix + full text; baseline: one SQL statement)", "ms"),
    Figure(
        "search_p95",
        "search p95 (prefix + full text; baseline: one SQL statement)",
        "ms",
        (Target("<=", 20),),
    ),
    Figure("put_p50", "put p50 (baseline: a bare upsert)", "ms", (Target("<=", 5),)),
    Figure("floor_p50", "authenticated GET of a missing item p50 (the API's floor)", "ms"),
]

# Strides through the vocabulary: primes, so the 8 words of an item differ.
_STRIDES = (7919, 104729, 1299709, 15485863, 179424673, 32452843, 49979687, 86028121)
_LOAD = """
INSERT INTO memory_memoryitem (id, project_id, namespace_path, depth, key, value, text,
    search_vector, tags, version, subject, actor_kind, actor_id, actor_name, created_at,
    updated_at)
SELECT md5('bench-memory' || g)::uuid, %(project)s,
    'bench.user:' || (g %% %(namespaces)s) || '.facts', 3, 'item-' || g,
    jsonb_build_object('n', g, 'first', w.words[1]), array_to_string(w.words, ' '),
    to_tsvector('english', array_to_string(w.words, ' ')), '[]', 1, '', 'system', '',
    'benchmark', now(), now()
FROM generate_series(1, %(items)s) AS g,
LATERAL (SELECT ARRAY(
    SELECT (%(vocabulary)s::text[])[1 + ((g::bigint * s) %% %(size)s)]
    FROM unnest(%(strides)s::bigint[]) AS s
) AS words) AS w
"""
_SEARCH = """
SELECT id, key, value, ts_rank(search_vector, q) AS score
FROM memory_memoryitem, websearch_to_tsquery('english', %s) AS q
WHERE project_id = %s AND (namespace_path = %s OR namespace_path LIKE %s)
    AND (expires_at IS NULL OR expires_at > now()) AND search_vector @@ q
ORDER BY score DESC, updated_at DESC, key LIMIT 10
"""
_UPSERT = """
INSERT INTO memory_memoryitem (id, project_id, namespace_path, depth, key, value, text,
    search_vector, tags, version, subject, actor_kind, actor_id, actor_name, created_at,
    updated_at)
VALUES (gen_random_uuid(), %s, %s, 3, %s, %s, %s, to_tsvector('english', %s), '[]', 1, '',
    'system', '', 'benchmark', now(), now())
ON CONFLICT (project_id, namespace_path, key) DO UPDATE
SET value = EXCLUDED.value, version = memory_memoryitem.version + 1, updated_at = now()
"""


def vocabulary() -> list[str]:
    """``VOCABULARY`` made-up words of 5 to 9 letters, the same every run."""
    rng = random.Random(33)
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 9)))
        )
    return sorted(words)


def load(size: Size, words: list[str]) -> None:
    """Insert the items with SQL (skipped when already there), then ANALYZE."""
    from django.db import connection, transaction

    from memory.models import MemoryItem
    from projects.models import default_project_id

    if MemoryItem.objects.filter(namespace_path__startswith="bench.").exists():
        return
    started = time.monotonic()
    # The full-text index is built once after the load, not row by row during it (PostgreSQL's
    # advice for bulk loads); it is the model's own index, dropped and added by Django.
    search_index = next(i for i in MemoryItem._meta.indexes if i.name == "memoryitem_search_idx")
    with connection.schema_editor() as editor:
        editor.remove_index(MemoryItem, search_index)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _LOAD,
            {
                "project": default_project_id(),
                "namespaces": size.namespaces,
                "items": size.items,
                "vocabulary": words,
                "size": len(words),
                "strides": list(_STRIDES[:WORDS_PER_ITEM]),
            },
        )
    with connection.schema_editor() as editor:
        editor.add_index(MemoryItem, search_index)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memoryitem")
    print(f"loaded {size.items} memory items in {time.monotonic() - started:.0f} s", flush=True)


def _timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def searches(
    client: Any, size: Size, words: list[str], rng: random.Random
) -> tuple[list[float], list[float]]:
    """``size.searches`` API searches and as many SQL ones; their times in ms."""
    from django.db import connection

    from projects.models import default_project_id

    project = default_project_id()
    api, sql = [], []
    for _ in range(size.searches):
        user, word = f"user:{rng.randrange(size.namespaces)}", rng.choice(words)
        body = json.dumps({"namespace_prefix": ["bench", user], "query": word, "limit": 10})

        def search(body: str = body) -> None:
            response = client.post("/api/v1/memory/search/", body, content_type="application/json")
            if response.status_code != 200:
                raise RuntimeError(f"search answered {response.status_code}: {response.content!r}")

        api.append(_timed(search))
        path = f"bench.{user}"

        def plain(word: str = word, path: str = path) -> None:
            with connection.cursor() as cursor:
                cursor.execute(_SEARCH, [word, project, path, f"{path}.%"])
                cursor.fetchall()

        sql.append(_timed(plain))
    return api, sql


def puts(client: Any, size: Size, rng: random.Random, tag: str) -> tuple[list[float], list[float]]:
    """``size.puts`` API puts of new keys and as many bare upserts; their times in ms."""
    from django.db import connection, transaction

    from projects.models import default_project_id

    project = default_project_id()
    api, sql = [], []
    for i in range(size.puts):
        user = f"user:{rng.randrange(size.namespaces)}"
        value = {"note": f"the user said {i}", "n": i}
        body = json.dumps(
            {"namespace": ["bench", user, "facts"], "key": f"{tag}-{i}", "value": value}
        )

        def put(body: str = body) -> None:
            response = client.put("/api/v1/memory/items/", body, content_type="application/json")
            if response.status_code not in (200, 201):
                raise RuntimeError(f"put answered {response.status_code}: {response.content!r}")

        api.append(_timed(put))
        text = value["note"]
        params = [project, f"bench.{user}.facts", f"{tag}-plain-{i}", json.dumps(value), text, text]

        def upsert(params: list[Any] = params) -> None:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(_UPSERT, params)

        sql.append(_timed(upsert))
    return api, sql


# Gets of missing keys answer faster than the API's per-user throttle allows (``"user"`` in
# ``DEFAULT_THROTTLE_RATES``: 200 a second): they start at most this many a second.
MISSES_PER_SECOND = 150


def misses(client: Any, size: Size, rng: random.Random) -> list[float]:
    """``size.puts`` API gets of keys that do not exist, started at most
    ``MISSES_PER_SECOND`` a second (the pause is outside each timed request); their times in
    ms.

    Raises:
        RuntimeError: a get was not answered 404.
    """
    times = []
    next_start = time.monotonic()
    # Django logs each 404 as a warning: not one line per request here.
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        for i in range(size.puts):
            user = f"user:{rng.randrange(size.namespaces)}"
            url = f"/api/v1/memory/items/?namespace=bench.{user}.facts&key=none-{i}"

            time.sleep(max(0.0, next_start - time.monotonic()))
            next_start = time.monotonic() + 1 / MISSES_PER_SECOND

            def get(url: str = url) -> None:
                response = client.get(url)
                if response.status_code != 404:
                    raise RuntimeError(f"get answered {response.status_code}: {response.content!r}")

            times.append(_timed(get))
    finally:
        logger.setLevel(level)
    return times


def run(bench: Bench) -> Iterator[Sample]:
    from django.test import Client

    size = SIZES[bench.size]
    bench.stop_workers()
    words = vocabulary()
    load(size, words)
    client = Client(HTTP_AUTHORIZATION=f"Token {bench_users()['operator_token']}")
    rng = random.Random(bench.seed)
    searches(client, size, words, rng)  # warm the caches and connections once
    for i in range(bench.repeat):
        found, plain = searches(client, size, words, rng)
        yield Sample("search_p50", percentile(found, 50), percentile(plain, 50))
        yield Sample("search_p95", percentile(found, 95), percentile(plain, 95))
        written, upserted = puts(client, size, rng, f"put-{i}")
        yield Sample("put_p50", percentile(written, 50), percentile(upserted, 50))
        yield Sample("floor_p50", percentile(misses(client, size, rng), 50))
