"""The airline example's database is created once when several upstream processes start at
the same time (the gateway starts one for each session that lists tools first)."""

from __future__ import annotations

import threading
import uuid

import psycopg
from psycopg import sql

from examples.airline.store import ensure_database
from tests.examples.test_airline_replay import AIRLINE_DSN


def test_processes_starting_together_all_find_the_database() -> None:
    name = f"agentops_airline_race_{uuid.uuid4().hex[:12]}"
    dsn = psycopg.conninfo.make_conninfo(AIRLINE_DSN, dbname=name)
    admin = psycopg.conninfo.make_conninfo(AIRLINE_DSN, dbname="postgres")
    together = threading.Barrier(6)
    failures: list[BaseException] = []

    def start() -> None:
        together.wait(timeout=10)
        try:
            ensure_database(dsn)
        except BaseException as exc:  # collected for the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == []
        with psycopg.connect(dsn) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE tablename = 'airline_effect'"
            ).fetchone()
        assert tables == (1,)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
