"""Each pytest-xdist worker gets services of its own: a pytest plugin (``-p
testsupport.parallel`` in ``pyproject.toml``'s ``addopts``).

pytest-django already gives each worker its own test database (``test_<name>_gw<N>``). What
the workers would otherwise share is Redis, where a worker's Celery workers would take the
other's step messages and its channel-layer groups would receive the other's live events,
and the example airline database, which the airline tests re-create. So, for worker ``gwN``,
this moves ``REDIS_URL`` to the Redis database ``N`` below the one it names (wrapping around
Redis's 16), which it empties as the worker starts (as ``scripts/test`` empties the first), and
gives ``AIRLINE_TEST_DATABASE_URL`` a ``_gwN`` suffix.

Test files marked ``long`` (``pytestmark``) are collected first, and ``scripts/test`` keeps
the collection's order (``--no-loadscope-reorder``; xdist otherwise starts the files with the
most tests first): each worker starts on a long file and the short ones fill the end, so the
run does not end on one worker finishing a long file alone.

The isolation runs when the plugin is imported: xdist sets ``PYTEST_XDIST_WORKER`` before the worker
reads its configuration, and pytest-django loads Django's settings (which read ``REDIS_URL``)
after ``-p`` plugins are imported. Without xdist it changes nothing.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

# Redis's default number of databases (``databases 16`` in redis.conf).
REDIS_DATABASES = 16
AIRLINE_DEFAULT = "postgres://postgres@127.0.0.1:5432/agentops_airline_test"


def _worker_index() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def _other_redis_database(url: str, index: int) -> str:
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(database - index) % REDIS_DATABASES}"))


def _isolate() -> None:
    index = _worker_index()
    if index is None:
        return
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _other_redis_database(os.environ["REDIS_URL"], index)
    airline = os.environ.get("AIRLINE_TEST_DATABASE_URL", AIRLINE_DEFAULT)
    os.environ["AIRLINE_TEST_DATABASE_URL"] = f"{airline}_gw{index}"


_isolate()


def pytest_configure(config: pytest.Config) -> None:
    """A worker's Redis database starts empty: no messages or groups an earlier run left."""
    if _worker_index() is not None and os.environ.get("REDIS_URL"):
        redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of files marked ``long`` first, in place; otherwise the order stays (a
    stable sort, the same in every worker, as xdist requires)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
