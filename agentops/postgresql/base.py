"""``ENGINE = "agentops.postgresql"``: Django's PostgreSQL backend whose connection pool
checks a connection with ``agentops.dbpool.check_connection`` before handing it out.

Django builds the pool itself and offers only its own check (``CONN_HEALTH_CHECKS``), which
finds dead connections one backoff step (1 s, 2 s, 4 s...) at a time; this backend sets the
pool's check when the pool is first used.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

from agentops.dbpool import check_connection


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        # psycopg_pool keeps the check given at construction in ``_check`` and reads it on
        # every ``getconn`` (psycopg_pool 3.2, ``ConnectionPool._getconn_with_check_loop``).
        if pool is not None and getattr(pool, "_check", None) is not check_connection:
            pool._check = check_connection
        return pool
