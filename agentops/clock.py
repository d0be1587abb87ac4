"""The database's clock: the one time every host agrees on.

A time one process writes and another compares (a step's lease, its heartbeat, when its retry
is due, when an approval request expires, a notification's claim) is taken from PostgreSQL,
not from the host that computes it: hosts' clocks drift apart, and a worker whose clock is a
minute behind would otherwise write a lease that others see expire a minute early (and
recover a step it is still running), while a sweeper a minute ahead would take live leases.

Which of PostgreSQL's times (its documentation, "Current Date/Time"):

- ``clock_timestamp()``, the time as the expression is evaluated, for a deadline being
  written (``DatabaseTime``, ``DatabaseNow``): a lease runs from when it is granted, not from
  when its transaction began, which may be long before when it waited for row locks
  (``now()`` is the transaction's start);
- a stable time for comparisons in a ``WHERE`` (Django's ``Now()``, ``statement_timestamp()``
  on PostgreSQL): the planner can use an index with it, which it cannot with the volatile
  ``clock_timestamp()``, and a time a little earlier only makes a check of "expired"
  conservative;
- ``database_now()``, one query, where Python needs the value (a sweep, a recovery, opening an
  approval request): off the step's hot path, which uses ``DatabaseTime`` in its writes
  instead and costs no round trip more.

On SQLite (a quick local start: one host) the host's clock is the database's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.functions import Now
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone


@dataclass(frozen=True)
class DatabaseTime:
    """A timestamp for ``runs.store.rows`` to write as the database's clock when the statement
    runs (``clock_timestamp()``) plus ``seconds`` (seconds, may be fractional): the SQL
    expression takes the place of a parameter, so it costs no round trip. The instance holds
    this value, not the time: read the row again for that."""

    seconds: float = 0.0

    SQL = "clock_timestamp() + %s * interval '1 second'"

    def on_host(self) -> datetime:
        """The same time from this host's clock (databases without ``clock_timestamp``)."""
        return timezone.now() + timedelta(seconds=self.seconds)


class DatabaseNow(Now):
    """The database's time as a query expression: ``clock_timestamp()`` on PostgreSQL (when
    the expression is evaluated), ``Now()``'s elsewhere. Add a ``timedelta`` for a deadline:
    ``DatabaseNow() + timedelta(seconds=30)``."""

    def as_postgresql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any
    ) -> tuple[str, tuple[str | int, ...]]:
        return self.as_sql(compiler, connection, template="CLOCK_TIMESTAMP()", **extra_context)


def database_now() -> datetime:
    """The database's current time (``clock_timestamp()``; the host's clock on SQLite), an
    aware datetime. One query: not for the step's hot path (``DatabaseTime`` there)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (found,) = cursor.fetchone()
    return found
