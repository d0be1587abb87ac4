"""The Redis cache backend (``agentops.cache``) keeps one client per pool and behaves as
Django's."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from django.conf import settings
from django.core.cache import caches

from agentops.cache import RedisCache

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis")


@pytest.fixture
def cache() -> RedisCache:
    return RedisCache(settings.REDIS_URL, {"KEY_PREFIX": f"test-cache-{uuid.uuid4().hex}"})


def test_the_project_cache_is_this_backend() -> None:
    assert isinstance(caches["default"], RedisCache)


def test_operations_give_what_was_stored(cache: RedisCache) -> None:
    assert cache.get("missing", "default") == "default"
    cache.set("n", 41, timeout=60)
    assert cache.incr("n") == 42
    cache.set("tree", {"a": [1, "b", None]}, timeout=60)
    assert cache.get("tree") == {"a": [1, "b", None]}
    assert cache.add("tree", "other") is False
    cache.delete("tree")
    assert cache.get("tree") is None
    # Seen by a client of its own: the values are in Redis, not in the process.
    raw = redis.Redis.from_url(settings.REDIS_URL)
    assert int(raw.get(cache.make_key("n"))) == 42  # type: ignore[arg-type]


def test_one_client_serves_every_operation_and_thread(
    cache: RedisCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[object] = []
    init = redis.Redis.__init__

    def counting_init(self: redis.Redis, *args: object, **kwargs: object) -> None:
        built.append(self)
        time.sleep(0.05)  # the other threads' first operations arrive meanwhile
        init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)
    answers: list[object] = []
    together = threading.Barrier(4)

    def work(n: int) -> None:
        if n < 4:
            together.wait(timeout=10)
        cache.set(f"k{n}", n, timeout=60)
        answers.append(cache.get(f"k{n}"))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    work(4)
    assert sorted(answers) == [0, 1, 2, 3, 4]  # type: ignore[type-var]
    assert len(built) == 1
