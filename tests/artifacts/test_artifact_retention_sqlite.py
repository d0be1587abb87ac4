"""On the embedded SQLite default, retention deletes a run's artifacts with the run and their
files too (there Django's cascade deletes the rows, which alone would leave the files)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PURGE = """
import io
from datetime import timedelta
from django.utils import timezone
from agentops.actors import Actor
from artifacts.services import artifact_upload
from runs.control.create import run_create
from runs.models import RetentionPolicy, Run, Step
from runs.retention import retention_purge
actor = Actor.system("test")
steps = [{"tool": "echo", "args": {"value": 1}}]
run = run_create(actor=actor, agent="plan", goal="old", steps=steps)
run.refresh_from_db()
step = Step.objects.get(run=run)
for step_id in (None, step.pk):
    artifact_upload(run_id=run.pk, step_id=step_id, name="out.txt", declared_type="text/plain",
                    stream=io.BytesIO(b"kept until the run goes"), actor=actor)
Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=40))
RetentionPolicy.objects.create(name="30 days", ttl_days=30)
print(run.status, retention_purge(actor=actor, batch_size=10)["runs"])
"""


def test_sqlite_retention_deletes_the_runs_artifact_files(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'agentops.sqlite3'}",
        AGENTOPS_VAR_DIR=str(tmp_path),
        CELERY_TASK_ALWAYS_EAGER="1",
        LOG_LEVEL="WARNING",
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
    files = tmp_path / "artifacts"
    assert manage("shell", "--no-imports", "-c", PURGE).split() == ["succeeded", "1"]
    assert files.is_dir()
    assert [path for path in files.rglob("*") if path.is_file()] == []
