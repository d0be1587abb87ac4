"""The web server outlives its database connections: after PostgreSQL terminates every
pooled connection (a restart, a failover, an operator's pg_terminate_backend), the next
requests are answered, not turned into 500s."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection

from testsupport.factories import make_token

pytestmark = pytest.mark.django_db(transaction=True)


def test_requests_after_every_connection_was_terminated_succeed(asgi_server, operator):
    key = make_token(operator)
    headers = {"Authorization": f"Token {key}"}
    url = f"{asgi_server.url}/api/v1/runs/"
    with httpx.Client(headers=headers, timeout=10) as http:
        # Requests at once leave many connections in the server's pool.
        with ThreadPoolExecutor(12) as threads:
            warm = list(threads.map(lambda _: http.get(url).status_code, range(48)))
        assert warm == [200] * 48
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            (terminated,) = cursor.fetchone()
        assert terminated >= 1
        statuses = [http.get(url).status_code for _ in range(10)]
    assert statuses == [200] * 10
