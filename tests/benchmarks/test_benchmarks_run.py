"""``benchmarks/run.py --size tiny`` runs every benchmark and prints each one's rows.

Benchmarks are measurements, never timed tests: this only checks that each one runs end to end
(its own database, workers and daphne, and the DBOS baseline's system database and workers) on
a tiny size and reports every figure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
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
from benchmarks.harness import HOST, HOST_FIGURES

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.worker


def _expected_rows() -> list[str]:
    """``| <benchmark> | <figure label> |`` of every row the tiny run must print."""
    figures = {
        module.NAME: module.FIGURES
        for module in (
            bench_throughput,
            bench_dispatch,
            bench_approval,
            bench_api,
            bench_pages,
            bench_retention,
            bench_search,
            bench_gateway,
            bench_conversation,
            bench_memory,
            bench_langgraph,
            bench_artifacts,
        )
    }
    figures[HOST] = HOST_FIGURES
    figures[bench_live.NAME] = [
        f for n in bench_live.SIZES["tiny"].clients for f in bench_live.figures_for(n)
    ]
    return [f"| {name} | {f.label} |" for name, rows in figures.items() for f in rows]


def _server() -> str:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"


def test_every_benchmark_runs_on_a_tiny_size_and_prints_its_rows(tmp_path):
    server = _server()
    database = f"{settings.DATABASES['default']['NAME']}_bench"
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
                f"--logs={tmp_path}",
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
    for prefix in _expected_rows():
        line = next((line for line in table if line.startswith(prefix)), None)
        assert line is not None, f"row not printed: {prefix}\n{result.stdout[-3000:]}"
        median = line.split("|")[4].strip()
        assert median != "-", f"nothing measured: {line}"


def test_the_throughput_window_splits_at_the_last_creation_response() -> None:
    # 0.5 s of a 2 s window creating; 600 steps finished in the 1.5 s after it.
    assert bench_throughput.creation_split(100.0, 100.5, 102.0, 600) == (25.0, 400.0)
    # Every run done before the last response: nothing after it.
    assert bench_throughput.creation_split(100.0, 101.0, 100.8, 0) == (100.0, 0.0)
