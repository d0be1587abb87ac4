"""INSERTs and upserts of new rows, and single statements whose answer is not read, for
``runs.store``: fields prepared as ``Model.save`` prepares them (``runs.store.adapt``), and
inside a batch (``runs.store.pipeline``) held and sent with the transaction's other writes."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from runs.store.adapt import Param, param_of
from runs.store.pipeline import CACHED_MAX_PARAMS, Write, current_batch
from runs.store.rows import database, table_of

M = TypeVar("M", bound=Model)


def _by_column(db: BaseDatabaseWrapper, fields: list[Field[Any, Any]]) -> bool:
    """Whether rows of ``fields`` can be inserted as one array per column: on PostgreSQL,
    when every field has one of the backend's own types (the conditions of Django's
    ``bulk_create``, ``SQLInsertCompiler.assemble_as_sql`` for PostgreSQL)."""
    return db.vendor == "postgresql" and all(
        not hasattr(f, "get_placeholder")
        and (f.target_field if f.is_relation else f).get_internal_type()  # type: ignore[attr-defined]
        in db.data_types
        for f in fields
    )


@cache
def _insert_sql(
    model: type[Model], rows: int, with_pk: bool, returning: bool
) -> tuple[str, list[Param], bool]:
    """The INSERT of ``rows`` new rows (returning their primary keys with ``returning``), what
    gives each of one row's parameters from its instance (``runs.store.adapt``), in order, and
    whether the parameters go by column.

    By column (more values than psycopg keeps the parsed form of a statement for,
    ``runs.store.pipeline.CACHED_MAX_PARAMS``; ``_by_column``), each parameter is
    the array of one column's values, unnested into rows, as Django's ``bulk_create`` does on
    PostgreSQL: the text is the same for any number of rows, so psycopg parses it once and
    PostgreSQL plans it once, where a ``VALUES`` list is new text for each number of rows and
    one longer than 4 KB is parsed again by psycopg on every use (``psycopg._queries``,
    MAX_CACHED_STATEMENT_LENGTH; about 2 ms of CPU for a run's 25 steps on the development
    machine)."""
    db = database()
    meta = model._meta
    fields = [f for f in meta.concrete_fields if with_pk or f is not meta.pk]
    columns = ", ".join(db.ops.quote_name(str(f.column)) for f in fields)
    # Up to the limit a VALUES list is cheaper: psycopg dumps each value in C, an array
    # element by element in Python (a step's three audit events: about 20 us of CPU as 48
    # values, 140 us as 16 arrays, on the development machine).
    by_column = rows * len(fields) > CACHED_MAX_PARAMS and _by_column(db, fields)
    if by_column:
        # Without the type's modifiers (varchar, not varchar(64)), as Django: no truncation.
        # In binary (``%b``): psycopg writes each element's binary form, where the text form
        # runs two regular expressions an element to quote it (creating a run of 25 steps:
        # about 2.5 ms of CPU less on the development machine, a sixth of the request).
        arrays = ", ".join(f"(%b)::{str(f.db_type(db)).split('(')[0]}[]" for f in fields)
        source = f"SELECT * FROM UNNEST({arrays})"  # noqa: S608 (types from the model)
    else:
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        source = f"VALUES {', '.join([row] * rows)}"
    sql = f"INSERT INTO {table_of(model).name} ({columns}) {source}"
    if returning:
        sql += f" RETURNING {db.ops.quote_name(str(meta.pk.column))}"
    return sql, [param_of(f, db.vendor, add=True) for f in fields], by_column


def insert(objs: Sequence[M], *, returning: bool = True) -> Sequence[M]:
    """``INSERT`` new instances of one model in one statement and set their primary keys.

    Fields are prepared as ``Model.save`` prepares them (defaults, ``auto_now_add``); many
    values go as one array per column (``_insert_sql``). Returns ``objs``. Without
    ``returning`` the keys the database gives are not read back (instances whose key is set
    keep it), and inside a batch the INSERT is held and sent with the batch's other writes.
    """
    if not objs:
        return objs
    db = database()
    model = type(objs[0])
    with_pk = objs[0].pk is not None
    sql, makers, by_column = _insert_sql(model, len(objs), with_pk, returning)
    if by_column:
        params = [[make(obj, db) for obj in objs] for make in makers]
    else:
        params = [make(obj, db) for obj in objs for make in makers]
    batch = current_batch()
    if not returning:
        if batch is not None:
            batch.write(Write(sql, params, table=model._meta.db_table, insert=True))
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
def _upsert_sql(model: type[Model], key: str, fields: tuple[str, ...]) -> tuple[str, list[Param]]:
    db = database()
    sql, columns, _ = _insert_sql(model, 1, False, False)
    table = table_of(model)
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
    db = database()
    model = type(obj)
    sql, columns = _upsert_sql(model, key, tuple(fields))
    params = [make(obj, db) for make in columns]
    execute(Write(sql, params, table=model._meta.db_table, row=getattr(obj, key)))


def execute(write: Write) -> None:
    """Run ``write`` now, raising its ``expect_one`` unless it changed exactly one row; inside
    a batch it is held and sent with the batch's other writes, and checked at the next sync
    (before the commit)."""
    batch = current_batch()
    if batch is not None:
        batch.write(write)
        return
    with database().cursor() as cursor:
        cursor.execute(write.sql, write.params)
        if write.expect_one is not None and cursor.rowcount != 1:
            raise write.expect_one
