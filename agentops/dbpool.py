"""The check web processes' database pool runs on a connection before a request gets it.

After PostgreSQL drops connections (a restart, a failover, ``pg_terminate_backend``), every
idle connection in the pool is dead. psycopg_pool's own check finds them one request at a
time and waits with a growing backoff between two failed checks (1 s, 2 s, 4 s...), so a pool
of twenty dead connections outlasts any request's timeout. This check, on the first dead
connection, has the pool check all its idle ones at once (``ConnectionPool.check``: broken
ones are replaced), so the request waits one backoff step at most.
"""

from __future__ import annotations

from typing import Any

from psycopg_pool import ConnectionPool


def check_connection(conn: Any) -> None:
    """Raise when ``conn`` no longer works, after clearing every dead idle connection out of
    the default database's pool."""
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        from django.db import connections

        pool = getattr(connections["default"], "pool", None)
        if pool is not None:
            pool.check()
        raise
