"""Django's Redis cache with one Redis client per connection pool for the process.

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
``benchmarks/README.md``, the 21:27 table). Here every cache object of the same ``LOCATION`` and
``OPTIONS`` shares one client, and with it the pools and their connections, for the process.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient
from django.utils.functional import cached_property


class _KeptClients(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
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
    (``LOCATION``, ``OPTIONS``)."""

    @cached_property
    def _cache(self) -> _KeptClients:
        return _shared_client(self._servers, self._options)  # type: ignore[attr-defined]
