"""``web.asgi`` does as the server starts what a web process's first request would otherwise
do (``web.asgi.warm_up``), and the server still starts when the database and Redis are down.

Each test imports ``web.asgi`` in a new interpreter: this one imported the views long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import _child_env
from testsupport.processes import ROOT, free_port

# What the first request of a new process found to do before ``warm_up``, read after
# importing ``web.asgi`` and before any request.
_REPORT = """
import json, sys
import web.asgi
from agentops.celery import app
from channels.layers import channel_layers
from django.db import connections
pool = connections["default"].pool
print(json.dumps({
    "views": "runs.api" in sys.modules and "approvals.api" in sys.modules,
    "celery finalized": app.finalized,
    "producer pool": app._pool is not None,
    "broker transport": "kombu.transport.redis" in sys.modules,
    "channel layer": "default" in channel_layers.backends,
    "database pool open": pool is not None and not pool.closed,
}))
"""


def _report(env: dict[str, str]) -> dict[str, bool]:
    done = subprocess.run(
        [sys.executable, "-c", _REPORT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_asgi_application_does_the_first_requests_work() -> None:
    env = {**_child_env(), "AGENTOPS_DB_POOL": "1"}
    assert _report(env) == {
        "views": True,
        "celery finalized": True,
        "producer pool": True,
        "broker transport": True,
        "channel layer": True,
        "database pool open": True,
    }


def test_the_server_starts_with_the_database_and_redis_down() -> None:
    nobody = free_port()
    env = {
        **_child_env(),
        "AGENTOPS_DB_POOL": "1",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{nobody}/agentops",
        "REDIS_URL": f"redis://127.0.0.1:{nobody}/0",
    }
    report = _report(env)
    assert report["views"]
    assert report["celery finalized"]
    assert report["database pool open"]
