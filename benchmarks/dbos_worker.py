"""One DBOS worker process of the throughput benchmark's DBOS baseline.

DBOS (``dbos``, Postgres-checkpointed durable workflows) is the peer a user would compare
agentops's executor with: a workflow of ``@DBOS.step()`` no-ops, each step's output checkpointed
in DBOS's system database on the same PostgreSQL server. The benchmark process registers the
queue and enqueues the workflows with a ``DBOSClient`` (``bench_throughput``); this process
launches DBOS and dequeues them, one workflow at a time (the queue's ``worker_concurrency`` is
1), as a Celery worker with ``--concurrency=1`` runs one task at a time.

Usage (the harness starts it; ``Bench.start_dbos_workers``)::

    python -m benchmarks.dbos_worker --system-database URL --queue NAME --executor ID

It prints ``READY`` (``READY_LINE``) once DBOS is launched and polls the queue, and shuts DBOS
down on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from types import FrameType

from dbos import DBOS, DBOSConfig

# The DBOS application the workers and the benchmark's client share: the client enqueues for
# this application and version, and only workers of both dequeue.
APP_NAME = "agentops-bench"
APP_VERSION = "bench"
WORKFLOW = "bench_noop_workflow"
READY_LINE = "READY"


@DBOS.step(name="bench_noop_step")
def noop_step(index: int) -> int:
    """A no-op step: returns its ``index``; DBOS checkpoints that output before the next step."""
    return index


@DBOS.workflow(name=WORKFLOW)
def noop_workflow(steps: int) -> int:
    """Run ``steps`` no-op steps one after the other; returns how many ran."""
    for index in range(steps):
        noop_step(index)
    return steps


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--system-database", required=True, help="postgresql:// URL")
    parser.add_argument("--queue", required=True, help="the queue to wait for before READY")
    parser.add_argument("--executor", required=True, help="this process's DBOS executor id")
    return parser.parse_args()


def _polling(queue: str) -> bool:
    """Whether DBOS's queue thread has started this queue's worker thread (named by DBOS)."""
    return any(t.name == f"queue-worker-{queue}" for t in threading.enumerate())


def main() -> None:
    args = _parse()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    config: DBOSConfig = {
        "name": APP_NAME,
        "application_version": APP_VERSION,
        # Each process is its own executor, so worker_concurrency counts per process.
        "executor_id": args.executor,
        "system_database_url": args.system_database,
        # The benchmark created the schema (DBOS.migrate) before starting the workers.
        "run_migrations": False,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    deadline = time.monotonic() + 30
    while not _polling(args.queue):
        if time.monotonic() > deadline:
            raise SystemExit(f"DBOS never polled queue {args.queue}")
        time.sleep(0.01)
    print(READY_LINE, flush=True)
    stop.wait()
    DBOS.destroy()


if __name__ == "__main__":
    main()
