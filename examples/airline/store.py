"""The airline data the tools act on, kept durably in PostgreSQL: one copy ("world") per
conversation.

Every document (a user, a flight, a reservation) is one row of ``airline_doc`` holding its
JSON as text, so key order, and with it each tool's output, is exactly that of the data files.
A world is created by copying the template world of its data files (``INSERT ... SELECT``);
creating an existing world again changes nothing, so a restarted replay finds its world as
the tools left it. ``airline_effect`` records each write's output under its idempotency key,
with the documents it changed (``changes``: ``{kind: {key: [before, after]}}``, before null
for a document it added), which is what undoing it restores (``examples.airline.revert``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared/data/tau-bench-airline"
DEFAULT_DSN = "postgres://postgres@127.0.0.1:5432/agentops_airline"
KINDS = ("users", "flights", "reservations")

SCHEMA = """
CREATE TABLE IF NOT EXISTS airline_doc (
    world text NOT NULL, kind text NOT NULL, key text NOT NULL, doc text NOT NULL,
    PRIMARY KEY (world, kind, key)
);
CREATE TABLE IF NOT EXISTS airline_effect (
    world text NOT NULL, idempotency_key text NOT NULL, tool text NOT NULL,
    output text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (world, idempotency_key)
);
ALTER TABLE airline_effect ADD COLUMN IF NOT EXISTS changes text;
"""


def ensure_database(dsn: str) -> None:
    """Create the database ``dsn`` names (through the ``postgres`` database of the same
    server) when it does not exist, and its tables. Several processes may start at once (a
    gateway opening an upstream for each of several sessions): one creates the database, and
    the others, which also found none, get PostgreSQL's refusal to create it again (a
    duplicate name, or the unique index of ``pg_database`` when they raced) and go on."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    name = str(info.get("dbname", ""))
    admin = psycopg.conninfo.make_conninfo(dsn, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            create = psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name))
            with contextlib.suppress(
                psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation
            ):
                conn.execute(create)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Two processes creating the tables at once: serialise on an advisory lock.
        conn.execute("SELECT pg_advisory_lock(7301)")
        try:
            conn.execute(SCHEMA)
        finally:
            conn.execute("SELECT pg_advisory_unlock(7301)")


def template_name(data_dir: Path) -> str:
    """The template world of the data files in ``data_dir``: named by their SHA-256."""
    digest = hashlib.sha256()
    for kind in KINDS:
        digest.update((data_dir / f"{kind}.json").read_bytes())
    return f"template:{digest.hexdigest()[:16]}"


class Store:
    """The airline database at ``dsn`` with the data files of ``data_dir``; a small
    connection pool (``size`` connections) shared by the tool calls of one process."""

    def __init__(
        self, dsn: str = DEFAULT_DSN, data_dir: Path = DEFAULT_DATA_DIR, size: int = 8
    ) -> None:
        ensure_database(dsn)
        self.data_dir = Path(data_dir)
        self.template = template_name(self.data_dir)
        self.pool = ConnectionPool(dsn, min_size=1, max_size=size, open=True)
        self._load_template()

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()

    def _load_template(self) -> None:
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(7302)")
            found = conn.execute(
                "SELECT 1 FROM airline_doc WHERE world = %s LIMIT 1", [self.template]
            ).fetchone()
            if found:
                return
            copy_sql = "COPY airline_doc (world, kind, key, doc) FROM STDIN"
            with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
                for kind in KINDS:
                    data = json.loads((self.data_dir / f"{kind}.json").read_text())
                    for key, doc in data.items():
                        copy.write_row((self.template, kind, key, json.dumps(doc)))

    def create_world(self, world: str) -> None:
        """Make world ``world`` a copy of the template, unless it exists already (then it is
        left as the tools left it)."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [world])
            if conn.execute(
                "SELECT 1 FROM airline_doc WHERE world = %s LIMIT 1", [world]
            ).fetchone():
                return
            conn.execute(
                "INSERT INTO airline_doc (world, kind, key, doc) "
                "SELECT %s, kind, key, doc FROM airline_doc WHERE world = %s",
                [world, self.template],
            )

    def documents(self, world: str) -> dict[str, dict[str, Any]]:
        """Every document of ``world`` by kind and key (for comparing worlds)."""
        found: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        with self.pool.connection() as conn:
            for kind, key, doc in conn.execute(
                "SELECT kind, key, doc FROM airline_doc WHERE world = %s", [world]
            ):
                found[kind][key] = json.loads(doc)
        return found

    def effects(self, world: str) -> list[tuple[str, str, str]]:
        """The writes recorded in ``world``: (idempotency key, tool, output), oldest first."""
        with self.pool.connection() as conn:
            return [
                (key, tool, output)
                for key, tool, output in conn.execute(
                    "SELECT idempotency_key, tool, output FROM airline_effect "
                    "WHERE world = %s ORDER BY created_at, idempotency_key",
                    [world],
                )
            ]


def recorded_output(conn: psycopg.Connection[Any], world: str, idempotency_key: str) -> str | None:
    """The output a write recorded in ``world`` under ``idempotency_key``, or None; takes the
    key's advisory lock until the transaction ends first, so a second call with the key waits
    for the first, then finds its output."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{world}/{idempotency_key}"])
    done = conn.execute(
        "SELECT output FROM airline_effect WHERE world = %s AND idempotency_key = %s",
        [world, idempotency_key],
    ).fetchone()
    return str(done[0]) if done else None
