"""Django's Redis cache with one Redis client per connection pool for the process, answering
as an empty cache while Redis cannot be reached.

Django's ``RedisCacheClient`` builds a new ``redis.Redis`` for every cache operation (its
connection pool is kept): about 0.1 ms of CPU each on the development machine, and a request
makes several (the API token's failed-attempt count, the throttles' history read and write,
the shared versions of the risk rules and admitted tokens). A ``redis.Redis`` is safe to
share between threads (it takes a connection from its pool for each command), so one per
pool is enough.

Django also keeps its cache objects per context (``django.core.cache.caches`` is an asgiref
``Local``): under ASGI every request gets a new cache object, and with Django's backend a new
connection pool, so each request opened a new TCP connection to Redis and went through its
handshake (about 6 ms of a daphne process's CPU per run creation on the development machine;
``benchmarks/HISTORY.md``, 2026-11-25, 21:27). Here every cache object of the same ``LOCATION`` and
``OPTIONS`` shares one client, and with it the pools and their connections, for the process.

What the cache holds is advisory: request and failed-token counts (throttles), and the shared
versions that let a process trust what it kept (``agentops.versions``). So while Redis cannot
be reached (refused, timed out) the cache answers as an empty one that keeps nothing, never
with an error: reads miss, writes keep nothing, ``incr`` finds no key. Requests are served
without throttles or the bad-token limit, and credentials and risk rules are read from the
database. The outage is logged when it begins and when it ends (``agentops.outages``), and for
a moment after each failure the cache is not tried, so requests do not each wait on Redis.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient
from django.utils.functional import cached_property

from agentops.outages import REDIS_UNREACHABLE, Outage

T = TypeVar("T")
WITHOUT_CACHE = (
    "requests are served without throttles or the bad-token limit, credentials and risk "
    "rules are read from the database, and their changes are not announced to other processes"
)


def _addresses(urls: Iterable[str]) -> str:
    """The servers of ``urls`` as ``host:port`` (Redis's port when none is given), without
    the credentials a URL may hold: words for the logs."""
    places = []
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname:
            places.append(f"{parts.hostname}:{parts.port or 6379}")
        else:  # a Unix socket
            places.append(f"{parts.scheme}://{parts.path}")
    return ", ".join(places)


class _KeptClients(RedisCacheClient):
    def __init__(self, servers: list[str], **kwargs: Any) -> None:
        super().__init__(servers, **kwargs)
        place = _addresses(servers)
        self.outage = Outage(f"the shared cache (Redis at {place})", WITHOUT_CACHE)
        # By the index of their pool (Django keeps its pools for the process). The first
        # operations may come from several threads at once: a pool and its client are made
        # under the lock, once.
        self._clients: dict[int, Any] = {}
        self._making = threading.Lock()

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)  # type: ignore[attr-defined]
        client = self._clients.get(index)
        if client is None:
            with self._making:
                client = self._clients.get(index)
                if client is None:
                    pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
                    client = self._clients[index] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


# The process's cache clients, by their servers and options (``_shared_client``).
_shared: dict[tuple[tuple[str, ...], str], _KeptClients] = {}
_sharing = threading.Lock()


def _shared_client(servers: list[str], options: dict[str, Any]) -> _KeptClients:
    """The process's one client of ``servers`` with ``options`` (made on first use)."""
    key = (tuple(servers), repr(sorted(options.items())))
    client = _shared.get(key)
    if client is None:
        with _sharing:
            client = _shared.get(key)
            if client is None:
                client = _shared[key] = _KeptClients(servers, **options)
    return client


class RedisCache(DjangoRedisCache):
    """``django.core.cache.backends.redis.RedisCache`` keeping its ``redis.Redis`` clients and
    connection pools for the process, shared by every cache object of the same settings
    (``LOCATION``, ``OPTIONS``), and answering as an empty cache that keeps nothing while
    Redis cannot be reached (see the module docstring)."""

    @cached_property
    def _cache(self) -> _KeptClients:
        return _shared_client(self._servers, self._options)  # type: ignore[attr-defined]

    def _or(self, missed: T, operation: Callable[..., T], *args: Any) -> T:
        """``operation(*args)``, or ``missed`` while Redis cannot be reached."""
        outage = self._cache.outage
        if outage.skipping():
            return missed
        try:
            done = operation(*args)
        except REDIS_UNREACHABLE as exc:
            outage.failed(exc)
            return missed
        outage.reached()
        return done

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._or(default, super().get, key, default, version)

    def get_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        return self._or({}, super().get_many, keys, version)

    def has_key(self, key: Any, version: Any = None) -> bool:
        return self._or(False, super().has_key, key, version)

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> bool:
        return self._or(False, super().add, key, value, timeout, version)

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        self._or(None, super().set, key, value, timeout, version)

    def set_many(self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> list[Any]:
        # Django's answer for the keys that could not be set: all of them.
        return self._or(list(data), super().set_many, data, timeout, version)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        return self._or(False, super().touch, key, timeout, version)

    def delete(self, key: Any, version: Any = None) -> bool:
        return self._or(False, super().delete, key, version)

    def delete_many(self, keys: Any, version: Any = None) -> None:
        self._or(None, super().delete_many, keys, version)

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        """Django's ``incr``; while Redis cannot be reached the key is missing, so ValueError,
        as Django raises for a missing key.

        Raises:
            ValueError: no such key (or Redis cannot be reached).
        """
        found = self._or(None, super().incr, key, delta, version)
        if found is None:
            raise ValueError(f"Key {key!r} not found")
        return found
