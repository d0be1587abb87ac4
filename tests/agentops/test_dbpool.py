"""The web processes' pool checks connections with ``agentops.dbpool.check_connection``,
installed through psycopg_pool's private ``_check`` (``agentops.postgresql.base.
install_pool_check``) on the releases it was written for."""

from __future__ import annotations

from typing import Any

import psycopg_pool
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from agentops.dbpool import check_connection
from agentops.postgresql import base
from agentops.postgresql.base import POOL_CHECK_PSYCOPG_POOL, install_pool_check

pytestmark = pytest.mark.django_db


def test_pool_check_is_installed_on_the_installed_psycopg_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fails on a psycopg_pool release the check was not written for: check that
    ``ConnectionPool._getconn_with_check_loop`` still reads ``self._check``, then add the
    release to ``POOL_CHECK_PSYCOPG_POOL``."""
    assert psycopg_pool.__version__.startswith(POOL_CHECK_PSYCOPG_POOL), psycopg_pool.__version__
    checked: list[Any] = []
    original = ConnectionPool.check_connection

    def spy(conn: Any) -> None:
        checked.append(conn)
        original(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(spy))
    params = connection.get_connection_params()
    pool = ConnectionPool(kwargs=params, min_size=1, max_size=1, open=False)
    assert install_pool_check(pool)
    pool.open(wait=True)
    try:
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
    # The pool asked check_connection, which asked psycopg_pool's own check.
    assert pool._check is check_connection
    assert len(checked) == 1


def test_another_psycopg_pool_keeps_djangos_check(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(psycopg_pool, "__version__", "4.0.0")
    base._pool_check_supported.cache_clear()
    try:
        pool = ConnectionPool(kwargs={}, open=False, check=ConnectionPool.check_connection)
        assert not install_pool_check(pool)
        assert pool._check is ConnectionPool.check_connection
        assert "psycopg_pool 4.0.0" in caplog.text
    finally:
        base._pool_check_supported.cache_clear()
