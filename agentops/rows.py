"""Plain-SQL reads and writes of rows, for the executor's hot path.

Building and compiling a query costs the ORM about half a millisecond of Python per statement
on a 2-core machine, two to three times what the statement itself costs; a step makes a dozen
of them, so the services that claim steps, record their outcomes and advance runs read and
write their rows here instead (figures: ``benchmarks/README.md``, "throughput").

Rows are still model instances: loaded through ``Model.from_db`` with each field's own database
converters, changed only by their FSM transitions, and written back column by column with each
field's own adaptation (``get_db_prep_save``, ``pre_save`` for ``auto_now`` fields), so JSON,
UUIDs and datetimes mean the same as through the ORM, on PostgreSQL and on the SQLite of a
quick local start. An instance loaded here writes back only the fields whose values differ
from the row it was loaded from. The SQL of each statement shape is built once per process.
Every write names a guard (the status or version the row was read with, like django-fsm's
``ConcurrentTransitionMixin``); a write that finds the row changed raises
``ConcurrentTransition``.

Inside ``batch()`` (PostgreSQL) statements are pipelined (psycopg's pipeline mode): each is
sent without waiting for its answer, and one round trip (``Batch.sync``) brings all the answers
back. Writes whose answers are not read (``write_where``, ``update``, ``insert`` without
``returning``, ``execute``) are held and sent as one statement of data-modifying CTEs when
something else is sent or the batch syncs; a guarded write is checked at the sync, which comes
before the commit. So a transaction of a dozen statements costs a few round trips and a few
statements instead of a dozen of each.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django_fsm import ConcurrentTransition

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]

# The row an instance was loaded from: (the row as the database sent it, its converted values).
_LOADED = "_agentops_rows_loaded"


def _db() -> BaseDatabaseWrapper:
    # ``django.db.connection`` looks the connection up again on every attribute access.
    return connections[DEFAULT_DB_ALIAS]


@dataclass(frozen=True)
class _Table:
    """What reading and writing one model's rows needs, computed once per model."""

    name: str
    columns: str
    attnames: list[str]
    converters: list[tuple[int, Any, list[Converter]]]
    auto_now: list[str]
    fields: dict[str, Field[Any, Any]]
    index: dict[str, int]
    converter_of: dict[int, tuple[Any, list[Converter]]]


@cache
def _table(model: type[Model]) -> _Table:
    db = _db()
    meta = model._meta
    concrete = list(meta.concrete_fields)
    converters = []
    for i, field in enumerate(concrete):
        col = field.get_col(meta.db_table)
        found = db.ops.get_db_converters(col) + field.get_db_converters(db)
        if found:
            converters.append((i, col, found))
    fields: dict[str, Field[Any, Any]] = {"pk": meta.pk}
    for field in concrete:
        fields[field.name] = fields[field.attname] = field
    return _Table(
        name=db.ops.quote_name(meta.db_table),
        columns=", ".join(db.ops.quote_name(str(f.column)) for f in concrete),
        attnames=[f.attname for f in concrete],
        converters=converters,
        auto_now=[f.name for f in concrete if getattr(f, "auto_now", False)],
        fields=fields,
        index={f.name: i for i, f in enumerate(concrete)},
        converter_of={i: (col, found) for i, col, found in converters},
    )


def _select_sql(
    model: type[Model],
    where: str,
    params: Sequence[Any],
    lock: bool,
    order_by: str,
    limit: int | None,
) -> tuple[str, Sequence[Any]]:
    db = _db()
    if not db.features.has_native_uuid_field:
        params = [p.hex if isinstance(p, uuid.UUID) else p for p in params]
    sql = f"SELECT {_table(model).columns} FROM {_table(model).name} WHERE {where}"  # noqa: S608
    if order_by:
        sql += f" ORDER BY {order_by}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    if lock and db.features.has_select_for_update:
        sql += " FOR UPDATE"
    return sql, params


def _converted(table: _Table, row: Sequence[Any], db: BaseDatabaseWrapper) -> list[Any]:
    values = list(row)
    for i, col, converters in table.converters:
        for convert in converters:
            values[i] = convert(values[i], col, db)
    return values


def _instances(model: type[M], found: Sequence[Sequence[Any]]) -> list[M]:
    db = _db()
    table = _table(model)
    objs = []
    for row in found:
        values = _converted(table, row, db)
        obj = model.from_db(db.alias, table.attnames, values)
        # Converted values that are objects (JSON) may be changed in place: keep the row too.
        setattr(obj, _LOADED, (row, values[:]))
        objs.append(obj)
    return objs


def _same(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same JSON (``1``, ``1.0`` and ``true`` differ, as they
    do in PostgreSQL's jsonb, though Python holds them equal)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _changed(obj: Model, table: _Table, names: Sequence[str]) -> list[str]:
    """Which of the fields ``names`` of ``obj`` differ from the row it was loaded from (all of
    them for an instance not loaded here, or already written back once)."""
    loaded = obj.__dict__.pop(_LOADED, None)
    if loaded is None:
        return list(names)
    row, values = loaded
    db = _db()
    changed = []
    for name in names:
        i = table.index[name]
        now = getattr(obj, table.attnames[i])
        if isinstance(values[i], (dict, list)):
            # The loaded object may have been changed in place: convert the row's value again.
            was = row[i]
            for convert in table.converter_of[i][1]:
                was = convert(was, table.converter_of[i][0], db)
            if not _same(now, was):
                changed.append(name)
        elif now != values[i] or type(now) is not type(values[i]):
            changed.append(name)
    return changed


def select(
    model: type[M],
    where: str,
    params: Sequence[Any],
    *,
    lock: bool = False,
    order_by: str = "",
    limit: int | None = None,
) -> list[M]:
    """Instances of ``model`` whose rows match the SQL condition ``where`` (``%s`` parameters;
    UUIDs are passed as the database stores them).

    ``lock`` adds ``FOR UPDATE`` (where the database has it): the rows stay locked until the
    transaction ends. ``order_by`` is an SQL ordering, ``limit`` a row count. Inside a batch,
    what was queued before is sent with it (one round trip).
    """
    sql, params = _select_sql(model, where, params, lock, order_by, limit)
    batch = _local.batch
    if batch is not None:
        cursor = batch.queue(sql, params)
        batch.sync()
        found = cursor.fetchall()
        cursor.close()
    else:
        with _db().cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchall()
    return _instances(model, found)


def get(model: type[M], pk: Any, *, lock: bool = False) -> M:
    """The instance of ``model`` with primary key ``pk`` (locked with ``lock``).

    Raises:
        model.DoesNotExist: no such row.
        django.core.exceptions.ValidationError: ``pk`` is not a valid key (e.g. not a UUID).
    """
    field = model._meta.pk
    key = field.get_db_prep_value(field.to_python(pk), _db())
    found = select(model, f"{field.column} = %s", [key], lock=lock)
    if not found:
        raise model.DoesNotExist(f"no {model._meta.model_name} {pk}")  # type: ignore[attr-defined]
    return found[0]


@cache
def _update_sql(
    model: type[Model], names: tuple[str, ...], where: tuple[str, ...]
) -> tuple[str, list[Field[Any, Any]]]:
    """The UPDATE setting ``names`` of rows matching ``where`` (all by field name), and the
    fields whose values its parameters are, in order."""
    db = _db()
    table = _table(model)
    fields = [table.fields[name] for name in (*names, *where)]
    columns = [f"{db.ops.quote_name(str(f.column))} = %s" for f in fields]
    assignments = ", ".join(columns[: len(names)])
    conditions = " AND ".join(columns[len(names) :])
    sql = f"UPDATE {table.name} SET {assignments} WHERE {conditions}"  # noqa: S608 (no user input)
    return sql, fields


def _update_params(
    model: type[Model], values: dict[str, Any], where: dict[str, Any]
) -> tuple[str, list[Any]]:
    db = _db()
    sql, fields = _update_sql(model, tuple(values), tuple(where))
    raw = [*values.values(), *where.values()]
    params = [field.get_db_prep_save(value, db) for field, value in zip(fields, raw, strict=True)]
    return sql, params


def update_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> int:
    """``UPDATE`` the rows of ``model`` whose fields equal ``where``, setting the fields of
    ``values`` (adapted as the ORM adapts them); returns how many rows changed. Inside a batch,
    what it holds is sent with it (one round trip): use ``write_where`` when the count does
    not matter."""
    sql, params = _update_params(model, values, where)
    batch = _local.batch
    if batch is not None:
        cursor = batch.queue(sql, params)
        batch.sync()
        return int(cursor.rowcount)
    with _db().cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def write_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> None:
    """``update_where`` without the count: inside a batch it is held and sent with the batch's
    other writes."""
    batch = _local.batch
    if batch is None:
        update_where(model, values, where)
        return
    sql, params = _update_params(model, values, where)
    row = where["pk"] if list(where) == ["pk"] else None
    batch.write(sql, params, table=model._meta.db_table, row=row)


def updated_fields(model: type[Model]) -> tuple[str, ...]:
    """The fields of ``model`` that change after insert, declared next to the model as
    ``UPDATED_FIELDS`` (what ``update`` writes, with the ``auto_now`` fields).

    Raises:
        TypeError: the model declares none.
    """
    declared = getattr(model, "UPDATED_FIELDS", None)
    if not declared:
        raise TypeError(f"{model.__name__} declares no UPDATED_FIELDS")
    return tuple(declared)


def update(obj: Model, *, guard: dict[str, Any]) -> None:
    """Write the ``UPDATED_FIELDS`` of ``obj`` that changed since it was loaded (all of them
    for an instance not loaded here), with its ``auto_now`` fields, to its row, if the row
    still has the values of ``guard`` (e.g. ``{"status": <status it was read with>}``).

    Raises:
        ConcurrentTransition: the row changed meanwhile (or is gone); inside a batch, from its
            next sync.
        TypeError: the model declares no ``UPDATED_FIELDS``.
    """
    model = type(obj)
    table = _table(model)
    names = _changed(obj, table, updated_fields(model))
    values = {name: getattr(obj, table.fields[name].attname) for name in names}
    for name in table.auto_now:
        values[name] = table.fields[name].pre_save(obj, add=False)
    changed = ConcurrentTransition(f"{obj!r} changed since it was read ({guard})")
    sql, params = _update_params(model, values, {"pk": obj.pk, **guard})
    batch = _local.batch
    if batch is not None:
        batch.write(sql, params, table=model._meta.db_table, row=obj.pk, expect_one=changed)
    else:
        with _db().cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.rowcount != 1:
                raise changed
    # Keep ConcurrentTransitionMixin's record of the saved status in step with the row, so
    # an ORM save of the same instance later is guarded by the new status.
    update_initial_state = getattr(obj, "_update_initial_state", None)
    if update_initial_state is not None:
        update_initial_state()


@cache
def _insert_sql(
    model: type[Model], rows: int, with_pk: bool, returning: bool
) -> tuple[str, list[Field[Any, Any]]]:
    """The INSERT of ``rows`` new rows (returning their primary keys with ``returning``), and
    the fields of one row's parameters, in order."""
    db = _db()
    meta = model._meta
    fields = [f for f in meta.concrete_fields if with_pk or f is not meta.pk]
    columns = ", ".join(db.ops.quote_name(str(f.column)) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = f"INSERT INTO {_table(model).name} ({columns}) VALUES {', '.join([row] * rows)}"  # noqa: S608
    if returning:
        sql += f" RETURNING {db.ops.quote_name(str(meta.pk.column))}"
    return sql, fields


def insert(objs: Sequence[M], *, returning: bool = True) -> Sequence[M]:
    """``INSERT`` new instances of one model in one statement and set their primary keys.

    Fields are prepared as ``Model.save`` prepares them (defaults, ``auto_now_add``);
    returns ``objs``. Without ``returning`` the keys the database gives are not read back
    (instances whose key is set keep it), and inside a batch the INSERT is held and sent with
    the batch's other writes.
    """
    if not objs:
        return objs
    db = _db()
    model = type(objs[0])
    with_pk = objs[0].pk is not None
    sql, fields = _insert_sql(model, len(objs), with_pk, returning)
    params = [f.get_db_prep_save(f.pre_save(obj, add=True), db) for obj in objs for f in fields]
    batch = _local.batch
    if not returning:
        if batch is not None:
            batch.write(sql, params, table=model._meta.db_table, insert=True)
        else:
            with db.cursor() as cursor:
                cursor.execute(sql, params)
        for obj in objs:
            obj._state.adding = not with_pk
            obj._state.db = db.alias
        return objs
    if batch is not None:
        cursor = batch.queue(sql, params)
        batch.sync()
        keys = cursor.fetchall()
    else:
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            keys = cursor.fetchall()
    # PostgreSQL and SQLite return the rows of a multi-row VALUES in order (Django's
    # bulk_create relies on the same).
    for obj, (key,) in zip(objs, keys, strict=True):
        obj.pk = key
        obj._state.adding = False
        obj._state.db = db.alias
    return objs


@cache
def _upsert_sql(
    model: type[Model], key: str, fields: tuple[str, ...]
) -> tuple[str, list[Field[Any, Any]]]:
    db = _db()
    sql, columns = _insert_sql(model, 1, False, False)
    table = _table(model)
    column = db.ops.quote_name(str(table.fields[key].column))
    sets = ", ".join(
        f"{db.ops.quote_name(str(table.fields[name].column))} = EXCLUDED."
        f"{db.ops.quote_name(str(table.fields[name].column))}"
        for name in fields
    )
    return f"{sql} ON CONFLICT ({column}) DO UPDATE SET {sets}", columns


def upsert(obj: Model, *, key: str, fields: Sequence[str]) -> None:
    """``INSERT`` a new instance, or, when a row with the same value of its unique field
    ``key`` exists, set that row's ``fields`` to the instance's values (``ON CONFLICT ... DO
    UPDATE``; PostgreSQL and SQLite). The key the database gives is not read back; inside a
    batch the statement is held and sent with the batch's other writes."""
    db = _db()
    model = type(obj)
    sql, columns = _upsert_sql(model, key, tuple(fields))
    params = [f.get_db_prep_save(f.pre_save(obj, add=True), db) for f in columns]
    execute(sql, params, table=model._meta.db_table, row=getattr(obj, key))


def execute(
    sql: str,
    params: Sequence[Any],
    *,
    table: str,
    row: Any = None,
    insert: bool = False,
    expect_one: Exception | None = None,
) -> None:
    """Run one INSERT or UPDATE (``%s`` parameters, no RETURNING) of ``table`` whose answer is
    not read (``row`` and ``insert`` as ``Batch.write``); with ``expect_one``, raise it unless
    the statement changed exactly one row. Inside a batch it is held and sent with the batch's
    other writes, and checked at the next sync (before the commit)."""
    batch = _local.batch
    if batch is not None:
        batch.write(sql, params, table=table, row=row, insert=insert, expect_one=expect_one)
        return
    with _db().cursor() as cursor:
        cursor.execute(sql, params)
        if expect_one is not None and cursor.rowcount != 1:
            raise expect_one


def fetch(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows (tuples) of one query; inside a batch, what it holds is sent with it."""
    batch = _local.batch
    if batch is not None:
        return batch.fetch_later(sql, params)()
    with _db().cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


@dataclass
class _Write:
    sql: str
    params: Sequence[Any]
    expect_one: Exception | None


@dataclass
class _Held:
    """Writes held by a batch until something else is sent. They go as one statement of
    data-modifying CTEs, which sees none of its own changes and may change a row only once:
    a write joins only if no held write is an INSERT into its table (it could not see the new
    rows), and, for an UPDATE, none updates the same row (by key) or rows of its table by a
    condition (which rows is not known)."""

    writes: list[_Write] = dataclasses.field(default_factory=list)
    inserted: set[str] = dataclasses.field(default_factory=set)
    updated: set[str] = dataclasses.field(default_factory=set)
    by_condition: set[str] = dataclasses.field(default_factory=set)
    rows: set[tuple[str, Any]] = dataclasses.field(default_factory=set)

    def admits(self, table: str, row: Any, insert: bool) -> bool:
        if insert:
            return True
        if table in self.inserted or table in self.by_condition:
            return False
        if row is None:
            return table not in self.updated
        return (table, row) not in self.rows

    def add(self, write: _Write, table: str, row: Any, insert: bool) -> None:
        self.writes.append(write)
        if insert:
            self.inserted.add(table)
            return
        self.updated.add(table)
        if row is None:
            self.by_condition.add(table)
        else:
            self.rows.add((table, row))


# psycopg keeps the parsed form of a statement only up to these sizes (psycopg._queries,
# MAX_CACHED_STATEMENT_LENGTH and _PARAMS); a longer combined write would be parsed again on
# every use, which costs more than the statements it combines.
_COMBINED_MAX_LENGTH = 3800
_COMBINED_MAX_PARAMS = 50


def _fits(group: list[_Write], write: _Write) -> bool:
    """Whether ``write`` may join ``group`` in one combined statement."""
    params = sum(len(held.params) for held in group) + len(write.params)
    length = sum(len(held.sql) + 40 for held in group) + len(write.sql) + 40
    return params <= _COMBINED_MAX_PARAMS and length <= _COMBINED_MAX_LENGTH


@cache
def _combined_sql(statements: tuple[str, ...]) -> str:
    """One statement running ``statements`` (each an INSERT or UPDATE without RETURNING) as
    data-modifying CTEs, answering one row of how many rows each changed."""
    ctes = ", ".join(f"w{i} AS ({sql} RETURNING 1)" for i, sql in enumerate(statements))
    counts = ", ".join(f"(SELECT count(*) FROM w{i})" for i in range(len(statements)))  # noqa: S608
    return f"WITH {ctes} SELECT {counts}"


class Batch:
    """Statements of this module sent without waiting for each answer, and writes sent
    together (see the module's docstring); on a database without pipelines (SQLite) each runs
    at once.

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
        # Checks at the next sync: (cursor, column of its counts row or None, error).
        self._checks: list[tuple[Any, int | None, Exception]] = []
        if self.db.vendor == "postgresql":
            self.db.ensure_connection()
            with self.db.wrap_database_errors:
                self._pipeline = self._stack.enter_context(self.db.connection.pipeline())
            self._stack.enter_context(self.db.execute_wrapper(self._outside_statement))

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

    def _send(self, sql: str, params: Sequence[Any]) -> Any:
        cursor = self.db.cursor()
        _local.issuing = True
        try:
            cursor.execute(sql, params)
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

    def write(
        self,
        sql: str,
        params: Sequence[Any],
        *,
        table: str,
        row: Any = None,
        insert: bool = False,
        expect_one: Exception | None = None,
    ) -> None:
        """Hold one INSERT or UPDATE (``%s`` parameters, no RETURNING) of ``table`` to be sent
        with the other held writes: with ``insert``, it adds rows (an upsert is an UPDATE of
        its ``row``); else it updates the one row whose key is ``row``, or the rows a condition
        picks (``row`` None). With ``expect_one``, the next sync raises it unless the write
        changed exactly one row."""
        if self._pipeline is None:
            cursor = self._send(sql, params)
            if expect_one is not None and cursor.rowcount != 1:
                raise expect_one
            return
        if not self._held.admits(table, row, insert):
            self._send_held()
        self._held.add(_Write(sql, params, expect_one), table, row, insert)

    def _send_held(self) -> None:
        held, self._held = self._held.writes, _Held()
        group: list[_Write] = []
        for write in held:
            if group and not _fits(group, write):
                self._send_group(group)
                group = []
            group.append(write)
        if group:
            self._send_group(group)

    def _send_group(self, group: list[_Write]) -> None:
        if len(group) == 1:
            (one,) = group
            cursor = self._send(one.sql, one.params)
            if one.expect_one is not None:
                self._checks.append((cursor, None, one.expect_one))
            return
        sql = _combined_sql(tuple(write.sql for write in group))
        cursor = self._send(sql, [param for write in group for param in write.params])
        for i, write in enumerate(group):
            if write.expect_one is not None:
                self._checks.append((cursor, i, write.expect_one))

    def select_later(
        self,
        model: type[M],
        where: str,
        params: Sequence[Any],
        *,
        lock: bool = False,
        order_by: str = "",
        limit: int | None = None,
    ) -> Callable[[], list[M]]:
        """``select`` sent now; returns the function that reads its instances after the next
        ``sync`` (called earlier, it waits for them: a round trip)."""
        rows = self.fetch_later(*_select_sql(model, where, params, lock, order_by, limit))
        return lambda: _instances(model, rows())

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

    def sync(self) -> None:
        """Send the held writes and wait for the answers of everything sent (one round trip;
        none when nothing is), then check the writes that named an ``expect_one`` error.

        Raises:
            the ``expect_one`` error of a write that changed no row (or several).
            django.db.DatabaseError: a statement failed (the transaction is aborted).
        """
        self._send_held()
        if not self._sent:
            return
        with self.db.wrap_database_errors:
            self._pipeline.sync()
        self._sent = False
        self._check()

    def _check(self) -> None:
        checks, self._checks = self._checks, []
        counts: dict[int, tuple[Any, ...]] = {}
        for cursor, column, error in checks:
            if column is None:
                changed = cursor.rowcount
            else:
                if id(cursor) not in counts:
                    counts[id(cursor)] = cursor.fetchone()
                changed = counts[id(cursor)][column]
            if changed != 1:
                raise error

    def close(self) -> None:
        """Send what is held and leave pipeline mode (one round trip, and the checks of
        ``sync``); what follows runs statement by statement, in the same transaction."""
        if _local.batch is self:
            _local.batch = None
        if self._pipeline is None:
            return
        self._send_held()
        self._pipeline = None
        with self.db.wrap_database_errors:
            self._stack.close()
        self._check()


class _Local(threading.local):
    batch: Batch | None = None
    issuing = False


_local = _Local()


@contextmanager
def batch() -> Iterator[Batch]:
    """A ``Batch`` for the statements of this module in this block (and this thread), closed
    (what it holds sent and checked) when the block ends. Open it inside
    ``transaction.atomic``, so the checks come before the commit.

    Raises:
        RuntimeError: a batch is already open in this thread.
    """
    if _local.batch is not None:
        raise RuntimeError("batches do not nest")
    opened = _local.batch = Batch()
    try:
        yield opened
    except BaseException:
        _local.batch = None
        opened._stack.close()
        raise
    opened.close()


def current_batch() -> Batch | None:
    """This thread's open batch, or None."""
    return _local.batch
