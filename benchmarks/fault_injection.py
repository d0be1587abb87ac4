"""Crash the executor while it works, and check that no step is lost and no effect repeated.

What it does: drops and re-creates a database (default ``agentops_faults``), migrates it, then
runs ``testsupport.faults.harness.run_harness``: its own ``redis-server`` on a free port, two Celery
workers (``--concurrency=2``) and Celery beat sweeping every second; ``--runs`` plan runs of
``--steps`` steps (two effect tools, one of them idempotent, and a few steps of a tool that
hangs past its timeout); while they execute, ``--kills`` SIGKILLs of worker processes (one in
six hits a worker's main process, which is then replaced), ``--redis-restarts`` SIGKILLs and
empty restarts of Redis, and ``--pg-terminations`` rounds of ``pg_terminate_backend`` on every
other connection to the database. Once every run has ended it checks the invariants and prints
the figures: runs, steps, faults by kind, lost and retried attempts, recovery time p50/p99
(from the kill, or the attempt's start, to the next attempt or the step's end), wall time,
final statuses, each run's outcome against the workload's own plan (succeeded, or failed at
a call of the non-idempotent tool whose outcome is unknown), and 0 expected for lost steps,
stuck runs, effect failures seen by the independent recorder, runs off their plan, ledger and
audit mismatches, broken audit chains.

Usage (from the project root; PostgreSQL on 127.0.0.1:5432 with user postgres, and
``redis-server`` on the PATH):

    .venv/bin/python benchmarks/fault_injection.py --runs 200 --steps 5 --kills 200 \\
        --redis-restarts 3 --pg-terminations 20

Exit status 0 when every invariant holds, 1 otherwise. Process logs go to ``--logs`` (default: a
temporary directory, printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")


def recreate_database(server: str, name: str) -> str:
    """Drop ``name`` (disconnecting its users) and create it empty; returns its URL.

    ``server`` is a ``postgres://user@host:port`` URL without a database name.
    """
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        ident = sql.Identifier(name)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
    return f"{server}/{name}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--redis-restarts", type=int, default=3)
    parser.add_argument("--pg-terminations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="agentops_faults")
    parser.add_argument("--logs", type=Path, default=None)
    args = parser.parse_args()

    url = recreate_database(args.server, args.database)
    os.environ["DATABASE_URL"] = url
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"
    started = time.monotonic()
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity=0"], cwd=ROOT, check=True)
    print(f"database {args.database} migrated in {time.monotonic() - started:.1f} s")

    import django

    django.setup()
    from testsupport.faults.harness import FaultPlan, run_harness

    plan = FaultPlan(
        runs=args.runs,
        steps=args.steps,
        kills=args.kills,
        redis_restarts=args.redis_restarts,
        pg_terminations=args.pg_terminations,
        seed=args.seed,
    )
    logs = args.logs or Path(tempfile.mkdtemp(prefix="agentops-faults-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"process logs in {logs}")
    report = run_harness(plan, workdir=logs)
    print(report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
