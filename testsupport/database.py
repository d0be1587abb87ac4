"""The database under test: its URL for child processes, and creating one from scratch."""

from __future__ import annotations

from urllib.parse import quote

import psycopg
from psycopg import sql

# Connections a benchmark database's own role may hold at once. PostgreSQL refuses more (a web
# server overloaded by the API benchmark then answers 500s, counted as failed requests) instead
# of letting the processes under test take every connection of a shared server.
CONNECTION_LIMIT = 50


def django_database_url() -> str:
    """The ``DATABASE_URL`` of the database Django's default connection uses (for child
    processes that must work on the same database, e.g. the test database)."""
    from django.db import connection

    db = connection.settings_dict
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def recreate_database(server: str, name: str) -> None:
    """Drop database ``name`` (disconnecting its users) and create it empty, owned by the role
    ``name`` (created when missing; LOGIN, ``CONNECTION_LIMIT`` connections).

    ``server`` is a ``postgres://user@host:port`` URL, without a database name, of a role that
    may create roles and databases.
    """
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        ident = sql.Identifier(name)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        limit = sql.Literal(CONNECTION_LIMIT)
        conn.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT {}").format(ident, limit))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(ident, ident))
