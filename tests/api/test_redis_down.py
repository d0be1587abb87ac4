"""The REST API serves while Redis cannot be reached (issue 29, item 9): a real uvicorn whose
Redis (cache, broker and channel layer) is a closed local port answers every request, without
throttles, creates and records runs, and logs each outage once, not per request. The runs are
started by the sweeper once the broker is back (``runs.recovery``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from audit.models import AuditEvent
from runs.models import Run
from tests.conftest import AsgiServer
from testsupport.factories import make_token
from testsupport.processes import free_port

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def without_redis(tmp_path: Path) -> Iterator[tuple[AsgiServer, int]]:
    """A uvicorn whose ``REDIS_URL`` is a port nothing listens on (that port), with throttles
    of one request a minute (a working throttle would refuse the second)."""
    redis_port = free_port()
    server = AsgiServer(
        tmp_path / "uvicorn.log",
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
        AGENTOPS_THROTTLE_USER="1/min",
        AGENTOPS_THROTTLE_ANON="1/min",
    )
    yield server, redis_port
    server.stop()


def test_the_api_serves_and_records_runs_without_redis_and_logs_the_outage_once(
    without_redis, operator
):
    server, redis_port = without_redis
    headers = {"Authorization": f"Token {make_token(operator)}"}
    with httpx2.Client(base_url=server.url, timeout=60) as http:
        created = [
            http.post(
                "/api/v1/runs/", json={"agent": "client", "goal": f"no redis {n}"}, headers=headers
            )
            for n in range(3)
        ]
        listed = http.get("/api/v1/runs/", headers=headers)
        schema = [http.get("/api/schema/", params={"format": "json"}) for _ in range(2)]
        bad = http.get("/api/v1/runs/", headers={"Authorization": "Token " + "0" * 64})
    assert [r.status_code for r in created] == [201, 201, 201]
    assert listed.status_code == 200
    assert [r.status_code for r in schema] == [200, 200]
    assert bad.status_code == 401
    ids = {r.json()["id"] for r in created}
    assert {str(pk) for pk in Run.objects.values_list("pk", flat=True)} == ids
    assert {str(e.run_id) for e in AuditEvent.objects.filter(verb="run.created")} == ids
    assert {r["id"] for r in listed.json()["results"]} == ids

    text = server.log.read_text()
    where = f"127.0.0.1:{redis_port}"
    assert text.count(f"the shared cache (Redis at {where}) is unreachable") == 1, text
    assert text.count("the Celery broker is unreachable") == 1, text
    assert "Internal Server Error" not in text
    assert "Traceback" not in text
