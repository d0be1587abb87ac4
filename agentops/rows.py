"""Plain-SQL reads and writes of rows, for the executor's hot path.

Building and compiling a query costs the ORM about half a millisecond of Python per statement
on a 2-core machine, two to three times what the statement itself costs; a step makes a dozen
of them, so the services that claim steps, record their outcomes and advance runs read and
write their rows here instead (figures: ``benchmarks/README.md``, "throughput").

Rows are still model instances: loaded through ``Model.from_db`` with each field's own database
converters, changed only by their FSM transitions, and written back column by column with each
field's own adaptation (``get_db_prep_save``, ``pre_save`` for ``auto_now`` fields), so JSON,
UUIDs and datetimes mean the same as through the ORM, on PostgreSQL and on the SQLite of a
quick local start. The SQL of each statement shape is built once per process. Every write
names a guard (the status or version the row was read with, like django-fsm's
``ConcurrentTransitionMixin``); a write that finds the row changed raises
``ConcurrentTransition``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django_fsm import ConcurrentTransition

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]


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
    )


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
    transaction ends. ``order_by`` is an SQL ordering, ``limit`` a row count.
    """
    db = _db()
    if not db.features.has_native_uuid_field:
        params = [p.hex if isinstance(p, uuid.UUID) else p for p in params]
    table = _table(model)
    sql = f"SELECT {table.columns} FROM {table.name} WHERE {where}"  # noqa: S608 (no user input)
    if order_by:
        sql += f" ORDER BY {order_by}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    if lock and db.features.has_select_for_update:
        sql += " FOR UPDATE"
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    objs = []
    for row in found:
        values = list(row)
        for i, col, converters in table.converters:
            for convert in converters:
                values[i] = convert(values[i], col, db)
        objs.append(model.from_db(db.alias, table.attnames, values))
    return objs


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


def update_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> int:
    """``UPDATE`` the rows of ``model`` whose fields equal ``where``, setting the fields of
    ``values`` (adapted as the ORM adapts them); returns how many rows changed."""
    db = _db()
    sql, fields = _update_sql(model, tuple(values), tuple(where))
    raw = [*values.values(), *where.values()]
    params = [field.get_db_prep_save(value, db) for field, value in zip(fields, raw, strict=True)]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


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
    """Write the ``UPDATED_FIELDS`` of ``obj`` (and its ``auto_now`` fields) to its row, if
    the row still has the values of ``guard`` (e.g. ``{"status": <status it was read with>}``).

    Raises:
        ConcurrentTransition: the row changed meanwhile (or is gone).
        TypeError: the model declares no ``UPDATED_FIELDS``.
    """
    table = _table(type(obj))
    values = {name: getattr(obj, table.fields[name].attname) for name in updated_fields(type(obj))}
    for name in table.auto_now:
        values[name] = table.fields[name].pre_save(obj, add=False)
    if update_where(type(obj), values, {"pk": obj.pk, **guard}) != 1:
        raise ConcurrentTransition(f"{obj!r} changed since it was read ({guard})")
    # Keep ConcurrentTransitionMixin's record of the saved status in step with the row, so
    # an ORM save of the same instance later is guarded by the new status.
    update_initial_state = getattr(obj, "_update_initial_state", None)
    if update_initial_state is not None:
        update_initial_state()


@cache
def _insert_sql(model: type[Model], rows: int, with_pk: bool) -> tuple[str, list[Field[Any, Any]]]:
    """The INSERT of ``rows`` new rows returning their primary keys, and the fields of one
    row's parameters, in order."""
    db = _db()
    meta = model._meta
    fields = [f for f in meta.concrete_fields if with_pk or f is not meta.pk]
    columns = ", ".join(db.ops.quote_name(str(f.column)) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = (
        f"INSERT INTO {_table(model).name} ({columns}) "  # noqa: S608 (no user input)
        f"VALUES {', '.join([row] * rows)} RETURNING {db.ops.quote_name(str(meta.pk.column))}"
    )
    return sql, fields


def insert(objs: Sequence[M]) -> Sequence[M]:
    """``INSERT`` new instances of one model in one statement and set their primary keys.

    Fields are prepared as ``Model.save`` prepares them (defaults, ``auto_now_add``);
    returns ``objs``.
    """
    if not objs:
        return objs
    db = _db()
    sql, fields = _insert_sql(type(objs[0]), len(objs), objs[0].pk is not None)
    params = [f.get_db_prep_save(f.pre_save(obj, add=True), db) for obj in objs for f in fields]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        # PostgreSQL and SQLite return the rows of a multi-row VALUES in order (Django's
        # bulk_create relies on the same).
        for obj, (key,) in zip(objs, cursor.fetchall(), strict=True):
            obj.pk = key
            obj._state.adding = False
            obj._state.db = db.alias
    return objs
