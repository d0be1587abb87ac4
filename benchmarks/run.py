"""Run every benchmark against this machine's PostgreSQL, Redis and real Celery workers and
daphne, and print one table: median, min and max over ``--repeat`` runs, the baseline measured
in the same runs, their ratio, the target and whether it is met (benchmarks/README.md). Its last
rows time a fixed pure-Python loop before and after the benchmarks: the machine's speed while
they ran, to compare figures in ms with a table measured at another moment.

Usage (from the project root; PostgreSQL on 127.0.0.1:5432 with user postgres, and Redis):

    .venv/bin/python benchmarks/run.py [--size tiny|full] [--only NAME ...] [--repeat 3]

It drops and re-creates its own database (``--database``; the throughput benchmark also its
DBOS baseline's system database, ``<database>_dbos``), migrates it, starts and stops its own
workers, DBOS workers and daphne, and uses its own Celery queue and channel-layer prefix (named
after the database) in the Redis database of ``--redis-url``. Exit status 0 when every benchmark ran
(a missed target is a measurement, not an error), 1 when one failed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import FrameType, ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import Bench  # noqa: E402
from benchmarks.table import (  # noqa: E402
    HOST,
    HOST_FIGURES,
    Row,
    Sample,
    reference_loop_ms,
    render_table,
)
from testsupport.database import recreate_database  # noqa: E402

BENCHMARKS = [
    "throughput",
    "dispatch",
    "approval",
    "live",
    "api",
    "pages",
    "search",
    "retention",
    "gateway",
    "conversation",
    "memory",
    "langgraph",
    "artifacts",
]


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", choices=["tiny", "full"], default="full")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=None)
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per benchmark (default 3; tiny: 1)"
    )
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="agentops_bench")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--web-processes",
        type=int,
        default=os.cpu_count() or 1,
        help="daphne processes sharing the web socket (default: one per core)",
    )
    parser.add_argument("--logs", type=Path, default=None, help="process logs (default: a tmp dir)")
    return parser.parse_args()


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main() -> int:
    args = _parse()
    logs = args.logs or Path(tempfile.mkdtemp(prefix="agentops-bench-"))
    logs.mkdir(parents=True, exist_ok=True)
    bench = Bench(
        server=args.server,
        database=args.database,
        redis_url=args.redis_url,
        queue=args.database,
        size=args.size,
        repeat=args.repeat or (1 if args.size == "tiny" else 3),
        logs=logs,
        seed=args.seed,
        web_processes=args.web_processes,
    )
    started = time.monotonic()
    recreate_database(bench.server, bench.database)
    os.environ.update(bench.env())
    bench.migrate()
    print(
        f"database {bench.database} migrated; size {bench.size}, {bench.repeat} run(s) each; "
        f"process logs in {logs}",
        flush=True,
    )
    import django

    django.setup()
    import benchmarks.tasks  # noqa: F401 (routes this process's tasks to the benchmark queue)

    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    host = {f.key: Row(HOST, f) for f in HOST_FIGURES}
    host["reference_before"].add(Sample("reference_before", reference_loop_ms()))
    rows: list[Row] = []
    failed: list[str] = []
    try:
        for name in args.only or BENCHMARKS:
            module: ModuleType = importlib.import_module(f"benchmarks.bench_{name}")
            by_key = {f.key: Row(name, f) for f in module.FIGURES}
            began = time.monotonic()
            print(f"== {name}", flush=True)
            try:
                for sample in module.run(bench):
                    by_key[sample.key].add(sample)
            except Exception:
                traceback.print_exc()
                failed.append(name)
            # Figures of another size (the live benchmark's client counts) have no samples.
            done = [row for row in by_key.values() if row.values or name in failed]
            rows.extend(done)
            print(render_table(done), flush=True)
            print(f"({name}: {time.monotonic() - began:.0f} s)", flush=True)
    finally:
        bench.stop_all()
    host["reference_after"].add(Sample("reference_after", reference_loop_ms()))
    rows.extend(host.values())
    print(
        f"\nAll benchmarks ({bench.size}, median of {bench.repeat}), "
        f"{time.monotonic() - started:.0f} s:\n"
    )
    print(render_table(rows))
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
