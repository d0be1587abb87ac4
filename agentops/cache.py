"""Django's Redis cache with one Redis client per connection pool for the process.

Django's ``RedisCacheClient`` builds a new ``redis.Redis`` for every cache operation (its
connection pool is kept): about 0.1 ms of CPU each on the development machine, and a request
makes several (the API token's failed-attempt count, the throttles' history read and write,
the shared versions of the risk rules and admitted tokens). A ``redis.Redis`` is safe to
share between threads (it takes a connection from its pool for each command), so one per
pool is enough.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


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


class RedisCache(DjangoRedisCache):
    """``django.core.cache.backends.redis.RedisCache`` keeping its ``redis.Redis`` clients
    (the same settings: ``LOCATION``, ``OPTIONS``)."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _KeptClients
