"""``ENGINE = "agentops.postgresql"``: Django's PostgreSQL backend (psycopg 3) whose connection
pool checks a connection with ``agentops.dbpool.check_connection`` before handing it out, and
whose connections load ``timestamptz`` values with psycopg's own loader, in C.

Django builds the pool itself and offers only its own check (``CONN_HEALTH_CHECKS``), which
finds dead connections one backoff step (1 s, 2 s, 4 s...) at a time; this backend sets the
pool's check when the pool is first used.

Django registers a ``timestamptz`` loader of its own (``psycopg_any.BaseTzLoader``): psycopg's
pure-Python loader, whose result it gives the connection's time zone (``DatabaseWrapper.
timezone``). psycopg's C loader (``psycopg_binary``) makes the same aware datetime several
times faster, in the session's ``TimeZone``, which Django sets to that zone when it connects
(``_configure_timezone``); a page loads hundreds of timestamps. It is used where both give
the same datetime, the same ``tzinfo`` object too: the connection's zone is UTC (``USE_TZ``
without a ``TIME_ZONE`` of the database), for which psycopg gives ``datetime.timezone.utc``
as Django does.
"""

from __future__ import annotations

import datetime
import functools
import logging
from typing import Any

import psycopg_pool
from django.conf import settings
from django.db.backends.postgresql import base
from django.db.backends.postgresql.psycopg_any import get_adapters_template
from psycopg import adapters
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import Format

from agentops.dbpool import check_connection

_TIMESTAMPTZ = adapters.types["timestamptz"].oid
# psycopg's default loader: its C class when psycopg_binary (or psycopg_c) is installed.
_PSYCOPG_TIMESTAMPTZ_LOADER = adapters.get_loader(_TIMESTAMPTZ, Format.TEXT)


class UtcTimestamptzLoader(Loader):
    """``timestamptz`` text as an aware datetime in UTC, by psycopg's default loader.

    ``timezone`` is what Django's ``create_cursor`` compares with the connection's zone: equal,
    it keeps this loader for the cursor rather than registering its own.
    """

    timezone = datetime.UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        assert _PSYCOPG_TIMESTAMPTZ_LOADER is not None  # psycopg always has one
        self._load = _PSYCOPG_TIMESTAMPTZ_LOADER(oid, context).load

    def load(self, data: Any) -> datetime.datetime:
        """The datetime ``data`` (the value's text, in the session's ``TimeZone``: UTC) holds.

        Raises:
            psycopg.DataError: a value Python cannot hold (``infinity``, a year past 9999).
        """
        return self._load(data)


@functools.cache
def _utc_adapters() -> AdaptersMap:
    # Django's adapters for an aware UTC connection, with psycopg's timestamptz loader.
    context = AdaptersMap(get_adapters_template(True, datetime.UTC))
    context.register_loader(_TIMESTAMPTZ, UtcTimestamptzLoader)
    return context


logger = logging.getLogger(__name__)
# The psycopg_pool releases that keep the check given at construction in the private
# ``ConnectionPool._check`` and read it on every ``getconn`` (``_getconn_with_check_loop``):
# the only way to give a pool Django builds (with its own ``check=``) another check.
POOL_CHECK_PSYCOPG_POOL = ("3.2.", "3.3.")


@functools.cache
def _pool_check_supported() -> bool:
    version = psycopg_pool.__version__
    if version.startswith(POOL_CHECK_PSYCOPG_POOL):
        return True
    logger.warning(
        "psycopg_pool %s: the database pool keeps Django's connection check (agentops's "
        "check_connection was written for psycopg_pool %s)",
        version,
        ", ".join(POOL_CHECK_PSYCOPG_POOL),
    )
    return False


def install_pool_check(pool: Any) -> bool:
    """Have ``pool`` (a ``psycopg_pool.ConnectionPool``) check connections with
    ``agentops.dbpool.check_connection``; whether it does. On a psycopg_pool release not in
    ``POOL_CHECK_PSYCOPG_POOL`` the pool keeps Django's check (``CONN_HEALTH_CHECKS``) and a
    warning is logged once. ``tests/agentops/test_dbpool.py::
    test_pool_check_is_installed_on_the_installed_psycopg_pool`` fails on such a release."""
    if not _pool_check_supported():
        return False
    if pool._check is not check_connection:
        pool._check = check_connection
    return True


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        """Django's pool, checking connections with ``check_connection``
        (``install_pool_check``)."""
        pool = super().pool
        if pool is not None:
            install_pool_check(pool)
        return pool

    def get_connection_params(self) -> dict[str, Any]:
        """Django's parameters, with psycopg's ``timestamptz`` loader where the connection's
        zone is UTC (see the module's docstring)."""
        params = super().get_connection_params()
        if settings.USE_TZ and self.timezone is datetime.UTC and "context" in params:
            params["context"] = _utc_adapters()
        return params
