"""The database under test: its URL for child processes, creating one from scratch, and an
empty database of a test's own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg
from psycopg import sql

# Connections a benchmark database's own role may hold at once. PostgreSQL refuses more (a web
# server overloaded by the API benchmark then answers 500s, counted as failed requests) instead
# of letting the processes under test take every connection of a shared server.
CONNECTION_LIMIT = 50


def _django_server_url() -> str:
    """``postgres://user[:password]@host:port`` of Django's default connection (no database)."""
    from django.db import connection

    db = connection.settings_dict
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"


def django_database_url() -> str:
    """The ``DATABASE_URL`` of the database Django's default connection uses (for child
    processes that must work on the same database, e.g. the test database)."""
    from django.db import connection

    return f"{_django_server_url()}/{connection.settings_dict['NAME']}"


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


@contextmanager
def scratch_database() -> Iterator[str]:
    """Point Django's default connection at a new, empty database (no tables, not even
    ``django_migrations``) for the body, and drop that database after it, also when the body
    raises; yields its name.

    The name is the current database's with ``_scratch`` added: pytest-django gives each
    pytest-xdist worker a test database of its own (``test_<name>_gw<N>``), so no two workers
    share a scratch database. One left by a killed run is dropped before creating it. The
    connection is closed and reopened on the other database, as Django's ``create_test_db``
    moves it to the test database; its role must be allowed to create databases.

    Raises:
        RuntimeError: the connection is inside a transaction (``atomic``), which closing it
            would lose: use it in transactional tests (``transactional_db``).
    """
    from django.db import connection

    if connection.in_atomic_block:
        raise RuntimeError("scratch_database needs a connection outside any transaction")
    original = connection.settings_dict["NAME"]
    name = f"{original}_scratch"
    ident = sql.Identifier(name)
    server = f"{_django_server_url()}/postgres"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
    connection.close()
    connection.settings_dict["NAME"] = name
    try:
        yield name
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(ident))
