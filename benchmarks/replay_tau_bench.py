"""Replay the τ-bench airline set on one Celery worker process and report throughput.

What it measures: wall time from importing the 100 recorded conversations
(``manage.py import_transcripts``) until every run has succeeded, with a reviewer approving
each write as soon as it is seen (polling every 0.2 s), on one ``celery -A agentops worker
--concurrency=1`` that this script starts and stops itself. Tool outputs are the recorded ones,
so the figure is the executor's own cost per step: claiming, recording, checkpointing,
advancing and the audit chain, plus the broker round trips.

Usage (from the project root, on a migrated database that no worker is serving; the worker is
started with ``--purge``, so the Redis database is emptied of queued tasks first):

    createdb -h 127.0.0.1 -U postgres agentops_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentops_bench
    export REDIS_URL=redis://127.0.0.1:6379/15
    .venv/bin/python manage.py migrate
    .venv/bin/python benchmarks/replay_tau_bench.py [--file PATH] [--timeout SECONDS]

Each invocation imports the set again as new runs (requested by nobody, so the reviewer it
creates, ``bench-reviewer-<timestamp>``, may approve them) and only counts those runs.
Output: runs, steps, approvals, wall seconds and steps/s; exit status 1 if a run failed or
the timeout (default 600 s) passed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT.parent / "shared" / "data" / "tau-bench-airline" / "trajectories.json"
POLL_SECONDS = 0.2

sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
# Tasks must go through Redis to the worker, never run in this process.
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"

from testsupport.processes import Process, celery_worker_command  # noqa: E402


def start_worker(log: Path) -> Process:
    """Start ``celery -A agentops worker --concurrency=1`` and wait until it is ready.

    Raises:
        RuntimeError: the worker exited or was not ready within 60 s.
    """
    cmd = celery_worker_command(hostname=f"bench-{os.getpid()}@%h", concurrency=1, purge=True)
    worker = Process(cmd, dict(os.environ), log, name="celery worker")
    try:
        worker.wait_for_log("ready.", "celery worker", timeout=60)
    except RuntimeError:
        worker.stop()
        raise
    return worker


def replay(path: Path, timeout: float) -> dict[str, float]:
    """Import ``path``, approve every write as a new reviewer and wait for all runs.

    Returns the figures (runs, steps, approvals, wall_seconds, steps_per_second).

    Raises:
        RuntimeError: a run failed or was cancelled, or ``timeout`` seconds passed.
    """
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from agentops.actors import Actor
    from approvals.models import ApprovalRequest, ApprovalStatus
    from approvals.services import approval_decide
    from projects.services import membership_set, project_default
    from runs.models import Run, RunStatus, Step

    reviewer = get_user_model().objects.create_user(f"bench-reviewer-{time.time_ns()}")
    membership_set(project=project_default(), user=reviewer, role="reviewer")
    actor = Actor.for_user(reviewer)

    since = timezone.now()
    started = time.monotonic()
    call_command("import_transcripts", str(path))
    runs = Run.objects.filter(created_at__gte=since, agent="transcript")
    approvals = 0
    while True:
        broken = runs.filter(status__in=[RunStatus.FAILED, RunStatus.CANCELLED]).first()
        if broken is not None:
            raise RuntimeError(f"run {broken.pk} ended {broken.status}: {broken.error}")
        pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, run__in=runs)
        for approval_id in pending.values_list("pk", flat=True):
            approval_decide(approval_id=approval_id, actor=actor, decision="approve")
            approvals += 1
        if not runs.exclude(status=RunStatus.SUCCEEDED).exists():
            break
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"runs not finished within {timeout} s")
        time.sleep(POLL_SECONDS)
    wall = time.monotonic() - started
    steps = Step.objects.filter(run__in=runs).count()
    return {
        "runs": runs.count(),
        "steps": steps,
        "approvals": approvals,
        "wall_seconds": round(wall, 2),
        "steps_per_second": round(steps / wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="τ-bench JSON file")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for runs")
    options = parser.parse_args()
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        parser.error("set DATABASE_URL and REDIS_URL (see the module docstring)")

    import django

    django.setup()
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        parser.error("the database is not fully migrated: run manage.py migrate first")

    with tempfile.TemporaryDirectory() as tmp:
        worker = start_worker(Path(tmp) / "worker.log")
        try:
            figures = replay(options.file, options.timeout)
        except RuntimeError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
        finally:
            worker.stop()
    print("τ-bench airline replay, one worker process (--concurrency=1)")
    for name, value in figures.items():
        print(f"  {name:<17} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
