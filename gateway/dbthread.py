"""The gateway's database thread: every database step of a gateway request runs there, one hop
at a time, in the order they were queued (``in_database``, awaited; ``in_database_soon``, not
awaited).

One thread, so that what it keeps lasts from one call to the next:

- its own context (not one copied from each request, as asgiref's hops use): Django's cache
  client, hence its Redis connection, is made once, where a context of each request's own
  would connect anew every call;
- its database connection, one of the pool's: a call takes two hops, and taking a connection
  out of the pool and back costs a round trip each time (the pool's check). It is given back
  to the pool when a hop's query failed, and when PostgreSQL closed it meanwhile (a server
  that terminates a connection writes its reason to it, so an idle connection with something
  to read is dead): the pool's check then replaces it (``agentops.dbpool``), so a restart of
  PostgreSQL between two calls fails neither.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import select
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

T = TypeVar("T")

logger = logging.getLogger(__name__)

_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-db")


async def in_database(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """``fn(**kwargs)`` run on the gateway's database thread, awaited; what it raises is
    raised here."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_thread, functools.partial(_hop, fn, kwargs))


def in_database_soon(fn: Callable[..., T], /, **kwargs: Any) -> Future[T]:
    """``fn(**kwargs)`` queued on the gateway's database thread now, not awaited: it runs after
    every hop queued before it and before every hop queued after it (one thread, first in,
    first out), so a request that follows finds its work done. Nobody waits for it to report
    a lost connection, so ``fn`` must be safe to repeat: when its connection fails
    (``OperationalError``, ``InterfaceError``: PostgreSQL restarted or closed it), it runs once
    more on a new one. What it raises then is logged (logger ``gateway.dbthread``, with
    ``fn``'s name), and kept in the returned future."""
    future = _thread.submit(_hop_twice, fn, kwargs)
    future.add_done_callback(functools.partial(_log_failure, getattr(fn, "__name__", repr(fn))))
    return future


def _hop_twice(fn: Callable[..., T], kwargs: dict[str, Any]) -> T:
    try:
        return _hop(fn, kwargs)
    except (OperationalError, InterfaceError):
        return _hop(fn, kwargs)


def _log_failure(name: str, future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        logger.error("gateway database work %s failed", name, exc_info=exc)


def _hop(fn: Callable[..., T], kwargs: dict[str, Any]) -> T:
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.connection is not None and _closed_by_server(connection.connection):
        connection.close()
    try:
        return fn(**kwargs)
    finally:
        if connection.connection is not None and (
            connection.errors_occurred or not connection.get_autocommit()
        ):
            connection.close()


def _closed_by_server(conn: Any) -> bool:
    if conn.closed or conn.broken:
        return True
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    return bool(readable)
