"""The Redis cache backend (``agentops.cache``) keeps one client per pool and behaves as
Django's."""

from __future__ import annotations

import contextvars
import threading
import time
import uuid

import pytest
import redis
from django.conf import settings
from django.core.cache import caches

import agentops.cache
from agentops.cache import RedisCache
from testsupport.processes import free_port

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
    monkeypatch.setattr(agentops.cache, "_shared", {})  # the process's client is made anew
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


def test_requests_of_an_asgi_server_share_the_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under ASGI each request runs in a context of its own, and Django's ``caches`` (an asgiref
    # Local) makes a new cache object in each: five requests, five cache objects, and before
    # the clients were shared for the process, five new TCP connections to Redis.
    connects: list[object] = []
    connect = redis.connection.AbstractConnection.connect

    def counting_connect(self: redis.connection.AbstractConnection) -> None:
        if self._sock is None:
            connects.append(self)
        connect(self)

    monkeypatch.setattr(redis.connection.AbstractConnection, "connect", counting_connect)
    caches["default"].get("warm")  # this process's connection, made if it was not yet
    connects.clear()
    seen: list[object] = []

    def request(n: int) -> None:
        cache = caches["default"]
        seen.append(cache)
        cache.set(f"test-cache-request-{n}", n, timeout=60)
        assert cache.get(f"test-cache-request-{n}") == n

    for n in range(5):
        contextvars.Context().run(request, n)
    assert len({id(cache) for cache in seen}) == 5
    assert connects == []


def test_while_redis_cannot_be_reached_it_is_an_empty_cache_and_the_outage_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = RedisCache(f"redis://:secret@127.0.0.1:{free_port()}/0", {"KEY_PREFIX": "down"})
    assert down.get("k", "default") == "default"
    assert down.add("k", 1) is False
    down.set("k", 1)
    assert down.get_many(["k"]) == {}
    assert down.has_key("k") is False
    with pytest.raises(ValueError, match="not found"):
        down.incr("k")
    logged = [r.getMessage() for r in caplog.records if r.name == "agentops.outages"]
    assert len(logged) == 1, logged
    assert logged[0].startswith("the shared cache (Redis at 127.0.0.1:")
    assert "secret" not in logged[0]
