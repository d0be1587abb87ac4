"""Pipelined statements for the executor's hot path: ``batch()`` and its ``Batch``.

Inside ``batch()`` (PostgreSQL) the statements of ``runs.store.rows`` are pipelined (psycopg's
pipeline mode): each is sent without waiting for its answer, and one round trip
(``Batch.sync``) brings all the answers back. Writes whose answers are not read are held and
sent as one statement of data-modifying CTEs when something else is sent or the batch syncs.
A guarded write (``expect_one``) is checked by the database itself, in the statement that
makes it (``agentops_expect_one``, migration ``runs.0015``): a write that changed no row, or
several, fails its statement, so the transaction can never commit it, even when the COMMIT
travels in the same round trip. A check of what was read earlier (``Batch.expect_later``: a
SELECT that must find one row) fails the same way.

Django owns the transaction: a batch is opened inside ``transaction.atomic``
(``runs.store.transaction.pipelined_atomic``) through psycopg's public
``Connection.pipeline``, and closed (everything sent, every check answered) before Django
commits. psycopg sends the transaction's BEGIN, and waits for it, before the batch's first
statement.

On SQLite (the embedded quick-start default) each statement runs at once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import KW_ONLY, dataclass
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

# The SQLSTATE ``agentops_expect_one`` raises (runs/migrations/0015_expect_one_function.py).
EXPECT_ONE_SQLSTATE = "AO001"


def _db() -> BaseDatabaseWrapper:
    # ``django.db.connection`` looks the connection up again on every attribute access.
    return connections[DEFAULT_DB_ALIAS]


@dataclass(slots=True)
class Write:
    """One INSERT or UPDATE (``%s`` parameters, no RETURNING) of ``table`` whose answer is not
    read (``Batch.write``, ``runs.store.inserts.execute``): with ``insert``, it adds rows (an
    upsert is an UPDATE of its ``row``); else it updates the one row whose key is ``row``, or
    the rows a condition picks (``row`` None). With ``expect_one``, that error is raised
    unless the write changed exactly one row."""

    sql: str
    params: Sequence[Any]
    _: KW_ONLY
    table: str
    row: Any = None
    insert: bool = False
    expect_one: Exception | None = None


@dataclass
class _Held:
    """Writes held by a batch until something else is sent. They go as one statement of
    data-modifying CTEs, which sees none of its own changes and may change a row only once:
    a write joins only if no held write is an INSERT into its table (it could not see the new
    rows), and, for an UPDATE, none updates the same row (by key) or rows of its table by a
    condition (which rows is not known)."""

    writes: list[Write] = dataclasses.field(default_factory=list)
    inserted: set[str] = dataclasses.field(default_factory=set)
    updated: set[str] = dataclasses.field(default_factory=set)
    by_condition: set[str] = dataclasses.field(default_factory=set)
    rows: set[tuple[str, Any]] = dataclasses.field(default_factory=set)

    def admits(self, write: Write) -> bool:
        if write.insert:
            return True
        table = write.table
        if table in self.inserted or table in self.by_condition:
            return False
        if write.row is None:
            return table not in self.updated
        return (table, write.row) not in self.rows

    def add(self, write: Write) -> None:
        self.writes.append(write)
        table = write.table
        if write.insert:
            self.inserted.add(table)
            return
        self.updated.add(table)
        if write.row is None:
            self.by_condition.add(table)
        else:
            self.rows.add((table, write.row))


# psycopg keeps the parsed form of a statement only up to these sizes (psycopg._queries,
# MAX_CACHED_STATEMENT_LENGTH and _PARAMS); a longer combined write would be parsed again on
# every use, which costs more than the statements it combines. ``runs.store.rows`` sizes its
# INSERTs by the same parameter limit.
_COMBINED_MAX_LENGTH = 3800
CACHED_MAX_PARAMS = 50


def _params(write: Write) -> int:
    # A guarded write passes one more parameter: the number of its check.
    return len(write.params) + (write.expect_one is not None)


def _fits(group: list[Write], write: Write) -> bool:
    """Whether ``write`` may join ``group`` in one combined statement."""
    params = sum(_params(held) for held in group) + _params(write)
    length = sum(len(held.sql) + 60 for held in group) + len(write.sql) + 60
    return params <= CACHED_MAX_PARAMS and length <= _COMBINED_MAX_LENGTH


@cache
def _combined_sql(statements: tuple[str, ...], checked: tuple[bool, ...]) -> str:
    """One statement running ``statements`` (each an INSERT or UPDATE without RETURNING) as
    data-modifying CTEs; each ``checked`` one must change exactly one row, or the statement
    fails (``agentops_expect_one``, whose second argument is the check's number)."""
    ctes = ", ".join(f"w{i} AS ({sql} RETURNING 1)" for i, sql in enumerate(statements))
    checks = ", ".join(
        f"agentops_expect_one((SELECT count(*) FROM w{i}), %s)"  # noqa: S608
        for i, check in enumerate(checked)
        if check
    )
    return f"WITH {ctes} SELECT {checks or 'NULL'}"


class Batch:
    """Statements sent without waiting for each answer, and writes sent together (see the
    module's docstring); on a database without pipelines (SQLite) each runs at once.

    A statement from anywhere else (the ORM, a savepoint) while the batch is open closes it
    first (``close``): the ORM reads a row count or an error right after sending, and in a
    pipeline they would not have arrived yet. What follows runs statement by statement.
    """

    def __init__(self) -> None:
        self.db = _db()
        self._stack = ExitStack()
        self._pipeline: Any = None
        self._held = _Held()
        self._sent = False
        # The ``expect_one`` errors of the guarded writes sent, by the number of their check.
        self._checks: list[Exception] = []
        if self.db.vendor != "postgresql":
            return
        self.db.ensure_connection()
        try:
            with self.db.wrap_database_errors:
                self._pipeline = self._stack.enter_context(self.db.connection.pipeline())
            self._stack.enter_context(self.db.execute_wrapper(self._outside_statement))
        except BaseException:
            self.abandon()
            raise

    @property
    def pipelined(self) -> bool:
        """Whether statements are pipelined (PostgreSQL) rather than run at once."""
        return self._pipeline is not None

    def _outside_statement(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if not _local.issuing:
            self.close()
        return execute(sql, params, many, context)

    def _send(self, sql: str, params: Sequence[Any] | None) -> Any:
        # In a pipeline, an earlier statement's error may arrive while this one is sent.
        cursor = self.db.cursor()
        _local.issuing = True
        try:
            cursor.execute(sql, params)
        except DatabaseError as error:
            raise self.failed_check(error) from error
        finally:
            _local.issuing = False
        self._sent = self._pipeline is not None
        return cursor

    def queue(self, sql: str, params: Sequence[Any]) -> Any:
        """Send one statement (``%s`` parameters), after the writes held before it, without
        waiting; returns its cursor, whose answer (rows, row count) is there after the next
        ``sync``."""
        self._send_held()
        return self._send(sql, params)

    def write(self, write: Write) -> None:
        """Hold ``write`` to be sent with the other held writes; its ``expect_one`` is raised
        by the next sync unless it changed exactly one row (and the transaction can no longer
        commit). Without a pipeline (SQLite) it runs at once, and raises then."""
        if self._pipeline is None:
            cursor = self._send(write.sql, write.params)
            if write.expect_one is not None and cursor.rowcount != 1:
                raise write.expect_one
            return
        if not self._held.admits(write):
            self._send_held()
        self._held.add(write)

    def _send_held(self) -> None:
        held, self._held = self._held.writes, _Held()
        group: list[Write] = []
        for write in held:
            if group and not _fits(group, write):
                self._send_group(group)
                group = []
            group.append(write)
        if group:
            self._send_group(group)

    def _send_group(self, group: list[Write]) -> None:
        if len(group) == 1 and group[0].expect_one is None:
            self._send(group[0].sql, group[0].params)
            return
        sql = _combined_sql(
            tuple(write.sql for write in group),
            tuple(write.expect_one is not None for write in group),
        )
        params = [param for write in group for param in write.params]
        for write in group:
            if write.expect_one is not None:
                params.append(len(self._checks))
                self._checks.append(write.expect_one)
        self._send(sql, params)

    def fetch_later(self, sql: str, params: Sequence[Any]) -> Callable[[], list[tuple[Any, ...]]]:
        """``fetch`` sent now; returns the function that reads its rows after the next
        ``sync`` (called earlier, it waits for them: a round trip)."""
        cursor = self.queue(sql, params)
        found: list[list[tuple[Any, ...]]] = []

        def read() -> list[tuple[Any, ...]]:
            if not found:
                with self.db.wrap_database_errors:
                    found.append(list(cursor.fetchall()))
            return found[0]

        return read

    def expect_later(self, sql: str, params: Sequence[Any], error: Exception) -> None:
        """Send a check that the SELECT ``sql`` (``%s`` parameters) finds exactly one row,
        without waiting: the database fails the check's statement otherwise
        (``agentops_expect_one``), so the transaction can never commit, and the next sync
        raises ``error``. A check whose SELECT locks rows (``FOR UPDATE``) takes them before
        the statements sent after it run, in the order the SELECT names them.

        Raises:
            RuntimeError: the batch is not pipelined (SQLite runs each statement at once:
                read the rows and compare them instead).
        """
        if self._pipeline is None:
            raise RuntimeError("expect_later needs a pipelined batch")
        check = f"SELECT agentops_expect_one((SELECT count(*) FROM ({sql}) AS found), %s)"  # noqa: S608
        self.queue(check, [*params, len(self._checks)])
        self._checks.append(error)

    def failed_check(self, error: DatabaseError) -> Exception:
        """The ``expect_one`` error of the guarded write whose check failed ``error`` (raised
        by a sync, or by the COMMIT that travelled in the pipeline), or ``error`` itself when
        no check failed it."""
        cause = error.__cause__
        if getattr(cause, "sqlstate", None) != EXPECT_ONE_SQLSTATE:
            return error
        detail = cause.diag.message_detail or ""  # type: ignore[union-attr]
        number = int(detail) if detail.isdigit() else -1
        return self._checks[number] if 0 <= number < len(self._checks) else error

    def sync(self) -> None:
        """Send the held writes and wait for the answers of everything sent (one round trip;
        none when nothing is).

        Raises:
            the ``expect_one`` error of a write that changed no row (or several); the
                transaction is aborted.
            django.db.DatabaseError: a statement failed (the transaction is aborted).
        """
        self._send_held()
        if not self._sent:
            return
        try:
            with self.db.wrap_database_errors:
                self._pipeline.sync()
        except DatabaseError as error:
            raise self.failed_check(error) from error
        self._sent = False

    def close(self) -> None:
        """Send what is held and leave pipeline mode (one round trip when anything is
        pending); what follows runs statement by statement. Closing a closed batch does
        nothing.

        Raises:
            as ``sync``.
        """
        if _local.batch is self:
            _local.batch = None
        if self._pipeline is None:
            return
        self._send_held()
        self._pipeline = None
        try:
            with self.db.wrap_database_errors:
                self._stack.close()
        except DatabaseError as error:
            raise self.failed_check(error) from error

    def abandon(self) -> None:
        """Leave pipeline mode after an error ended the block: what the pipeline still held is
        discarded or fails (psycopg collects every answer before it leaves). Django's atomic
        block then rolls the transaction back. An error while leaving is the pipeline's
        answer to what already failed: it is logged, and the error that ended the block is
        the one raised."""
        if _local.batch is self:
            _local.batch = None
        self._pipeline = None
        try:
            with self.db.wrap_database_errors:
                self._stack.close()
        except DatabaseError:
            logger.warning("leaving a failed pipeline", exc_info=True)


class _Local(threading.local):
    batch: Batch | None = None
    issuing = False


_local = _Local()


@contextmanager
def batch() -> Iterator[Batch]:
    """A ``Batch`` for the statements of ``runs.store.rows`` in this block (and this thread),
    closed (what it holds sent and checked) when the block ends. Open it inside
    ``transaction.atomic`` (after the block's savepoint, which is a statement from elsewhere
    and would close it), so that the checks come before the commit.

    Raises:
        RuntimeError: a batch is already open in this thread.
        the ``expect_one`` error of a write whose check failed (``Batch.failed_check``).
        django.db.DatabaseError: a statement failed.
    """
    if _local.batch is not None:
        raise RuntimeError("batches do not nest")
    opened = _local.batch = Batch()
    try:
        yield opened
        opened.close()
    except DatabaseError as error:
        opened.abandon()
        found = opened.failed_check(error)
        if found is error:
            raise
        raise found from error
    except BaseException:
        opened.abandon()
        raise
    opened.close()


def current_batch() -> Batch | None:
    """This thread's open batch, or None."""
    return _local.batch
