"""The embedded default of a quick local start (SQLite, tasks run inline, no Redis) still runs
agents end to end: ``scripts/start`` falls back to it where PostgreSQL or Redis is missing."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
from audit.selectors import chain_verify
from runs.models import Run
runs = {run.goal: run for run in Run.objects.all()}
print(runs["Add up an invoice"].status, runs["Email the customer their refund"].status_info.value)
print(all(chain_verify(f"run:{run.pk}").ok for run in runs.values()))
# The pages people open first, as the demo's operator and reviewer: each answers 200.
from django.contrib.auth.models import User
from django.test import Client
urls = ["/", "/?status=running", "/approvals/", *(f"/runs/{run.pk}/" for run in runs.values())]
for name in ("operator", "reviewer"):
    client = Client()
    client.force_login(User.objects.get(username=name))
    print(sorted({client.get(url).status_code for url in urls}))
"""


def test_demo_runs_execute_on_sqlite_without_redis(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'agentops.sqlite3'}",
        AGENTOPS_VAR_DIR=str(tmp_path),
        CELERY_TASK_ALWAYS_EAGER="1",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="testserver",
    )

    def manage(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return result.stdout

    manage("migrate", "--noinput", "--verbosity=0")
    manage("seed_demo")
    lines = manage("shell", "--no-imports", "-c", CHECK).split()
    assert lines == ["succeeded", "awaiting_approval", "True", "[200]", "[200]"]
