"""``benchmarks/run.py --size tiny --only NAME ...`` run for a test, and the rows it must print.

Benchmarks are measurements, never timed tests: the tests only check that each benchmark runs
end to end (its own database, workers and web server, and the DBOS baseline's system database
and workers) on a tiny size and reports every figure. The benchmarks are split into three
groups (``GROUPS``), one test file each, so that pytest-xdist's workers run them side by side.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psycopg
from django.conf import settings
from psycopg import sql

from benchmarks import (
    bench_api,
    bench_approval,
    bench_artifacts,
    bench_conversation,
    bench_dispatch,
    bench_gateway,
    bench_langgraph,
    bench_live,
    bench_memory,
    bench_pages,
    bench_retention,
    bench_search,
    bench_throughput,
)
from benchmarks.table import HOST, HOST_FIGURES

ROOT = Path(__file__).resolve().parent.parent.parent

GROUPS: dict[str, tuple[ModuleType, ...]] = {
    "executor": (bench_throughput, bench_dispatch, bench_approval, bench_live),
    "api": (bench_api, bench_pages, bench_search, bench_retention),
    "integrations": (
        bench_gateway,
        bench_conversation,
        bench_memory,
        bench_langgraph,
        bench_artifacts,
    ),
}


def _labels(module: ModuleType) -> list[str]:
    if module is bench_live:
        clients = bench_live.SIZES["tiny"].clients
        return [f.label for n in clients for f in bench_live.figures_for(n)]
    return [f.label for f in module.FIGURES]


def _server() -> str:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"


def run_group(group: str, logs: Path) -> None:
    """Run the benchmarks of ``GROUPS[group]`` at the tiny size in a database of their own
    (``<test database>_bench_<group>``, dropped afterwards) and check that the table prints
    every row of theirs and the host's, each with a median.

    Raises:
        AssertionError: the run failed, or a row is missing or has no figure.
    """
    server = _server()
    database = f"{settings.DATABASES['default']['NAME']}_bench_{group}"
    modules = GROUPS[group]
    try:
        result = subprocess.run(
            [
                sys.executable,
                "benchmarks/run.py",
                "--size=tiny",
                "--repeat=1",
                f"--server={server}",
                f"--database={database}",
                f"--redis-url={settings.REDIS_URL}",
                f"--logs={logs}",
                "--only",
                *(module.NAME for module in modules),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            for name in (database, f"{database}_dbos"):
                ident = sql.Identifier(name)
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout.split("All benchmarks")[-1].splitlines()
    expected = [f"| {HOST} | {f.label} |" for f in HOST_FIGURES] + [
        f"| {module.NAME} | {label} |" for module in modules for label in _labels(module)
    ]
    for prefix in expected:
        line = next((line for line in table if line.startswith(prefix)), None)
        assert line is not None, f"row not printed: {prefix}\n{result.stdout[-3000:]}"
        median = line.split("|")[4].strip()
        assert median != "-", f"nothing measured: {line}"
