"""The independent recorder of side effects: what the fault tools did, written through its own
database connection to its own table, which the product never reads.

Each effect-tool call records one row (key, step id, tool) before it returns: a repeated call
shows up as a second row, whatever the product's ledger says. The invariants read the rows
back through a connection of their own too.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

import psycopg

TABLE = "fault_effects"

_local = threading.local()


def _connect() -> psycopg.Connection:
    # The process's DATABASE_URL (the cluster gives every child the database under test).
    return psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)


def reset(database_url: str) -> None:
    """Create the table (no unique constraint, on purpose) and empty it."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (key text NOT NULL, step_id bigint NOT NULL, "
            "tool text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        conn.execute(f"TRUNCATE {TABLE}")


def record(*, key: str, step_id: int, tool: str) -> None:
    """Record one effect of ``tool`` for idempotency key ``key``, committed at once.

    Raises:
        psycopg.Error: the connection broke (the row may or may not be there; the connection
            is dropped and the next call opens a new one).
    """
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = _local.conn = _connect()
    try:
        conn.execute(
            f"INSERT INTO {TABLE} (key, step_id, tool) VALUES (%s, %s, %s)",  # noqa: S608
            [key, step_id, tool],
        )
    except psycopg.Error:
        _local.conn = None
        conn.close()
        raise


def effects(database_url: str) -> Counter[str]:
    """How many effects were recorded for each idempotency key."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(f"SELECT key, count(*) FROM {TABLE} GROUP BY key").fetchall()  # noqa: S608
    return Counter({key: int(n) for key, n in rows})
