"""Plain-SQL reads and writes of rows, for the executor's hot path.

Building and compiling a query costs the ORM about half a millisecond of Python per statement
on a 2-core machine, two to three times what the statement itself costs; a step makes a dozen
of them, so the services that claim steps, record their outcomes and advance runs read and
write their rows here instead (figures: ``benchmarks/README.md``, "What bounds each figure", and
``benchmarks/HISTORY.md``).

Rows are still model instances: built by ``Model.from_db``, with each field's own database
converters, changed only by their FSM transitions, and written back
column by column with each field's own adaptation (``get_db_prep_save``, ``pre_save`` for
``auto_now`` fields; skipped where it would return the value as it is: ``runs.store.adapt``), so
JSON, UUIDs and datetimes mean the same as through the ORM, on PostgreSQL and on the SQLite of
a quick local start.
An instance loaded here writes back only the fields whose values differ from the row it was
loaded from. The SQL of each statement shape is built once per process.
Every write names a guard (the status or version the row was read with, like django-fsm's
``ConcurrentTransitionMixin``); a write that finds the row changed raises
``ConcurrentTransition``.

Inside ``runs.store.pipeline.batch()`` (PostgreSQL) statements are pipelined: writes whose
answers are not read (``write_where``, ``update``; ``runs.store.inserts``' ``insert``
without ``returning``, ``upsert`` and ``execute``) are held and sent together, reads queued
with ``select_later`` are answered together, and a guarded write is checked by the database
before the commit. So a transaction of a dozen statements costs a few round trips and a few
statements instead of a dozen of each.
"""

from __future__ import annotations

import copy
import importlib.metadata
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django_fsm import ConcurrentTransition, ConcurrentTransitionMixin

from agentops.clock import DatabaseTime
from runs.store.adapt import Adapter, adapter_of
from runs.store.pipeline import current_batch

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]

# The row an instance was loaded from: (the row as the database sent it, its converted values).
_LOADED = "_agentops_rows_loaded"


def database() -> BaseDatabaseWrapper:
    # ``django.db.connection`` looks the connection up again on every attribute access, and
    # ``connections[...]`` goes through asgiref's context-aware local: inside a batch (this
    # thread's, so this thread's connection) its own reference is the same object, cheaper.
    opened = current_batch()
    return connections[DEFAULT_DB_ALIAS] if opened is None else opened.db


@dataclass(frozen=True)
class Table:
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
def table_of(model: type[Model]) -> Table:
    db = database()
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
    return Table(
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
    db = database()
    if not db.features.has_native_uuid_field:
        params = [p.hex if isinstance(p, uuid.UUID) else p for p in params]
    sql = f"SELECT {table_of(model).columns} FROM {table_of(model).name} WHERE {where}"  # noqa: S608
    if order_by:
        sql += f" ORDER BY {order_by}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    if lock and db.features.has_select_for_update:
        sql += " FOR UPDATE"
    return sql, params


def _converted(table: Table, row: Sequence[Any], db: BaseDatabaseWrapper) -> list[Any]:
    values = list(row)
    for i, col, converters in table.converters:
        for convert in converters:
            values[i] = convert(values[i], col, db)
    return values


def column_list(model: type[Model]) -> str:
    """The quoted columns of ``model``'s table, in the order ``instances`` reads them."""
    return table_of(model).columns


def width(model: type[Model]) -> int:
    """How many columns a row of ``model`` has in ``column_list``."""
    return len(table_of(model).attnames)


def instances(model: type[M], found: Sequence[Sequence[Any]]) -> list[M]:
    """Instances of ``model`` from rows of its ``column_list`` (tuples as the database sent
    them), each field converted as the ORM converts it, built by ``Model.from_db``; they write
    back only what changes."""
    db = database()
    table = table_of(model)
    objs = []
    for row in found:
        values = _converted(table, row, db)
        obj = model.from_db(db.alias, table.attnames, values)
        # Converted values that are objects (JSON) may be changed in place: keep the row too.
        setattr(obj, _LOADED, (row, values[:]))
        objs.append(obj)
    return objs


def mark_saved(obj: Model) -> None:
    """Record that the row of ``obj`` now holds the instance's values (a transaction that
    wrote them has committed): a later ``update`` of it writes only what changes after this.
    Its JSON values are copied, so that changing them in place later counts as a change."""
    table = table_of(type(obj))
    values = [getattr(obj, attname) for attname in table.attnames]
    copies = [copy.deepcopy(v) if isinstance(v, (dict, list)) else v for v in values]
    obj.__dict__[_LOADED] = (None, copies)


def clone(obj: M) -> M:
    """A separate instance with the same values as ``obj`` (JSON values shared, not copied:
    assign new ones rather than change them in place) and the same record of what its row
    holds, for changes that may be given up without touching ``obj`` (``copy.copy``, which
    Django's ``Model.__getstate__`` gives a state of its own)."""
    return copy.copy(obj)


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


def _changed(obj: Model, table: Table, names: Sequence[str]) -> list[str]:
    """Which of the fields ``names`` of ``obj`` differ from the row it was loaded from (all of
    them for an instance not loaded here, or already written back once)."""
    loaded = obj.__dict__.pop(_LOADED, None)
    if loaded is None:
        return list(names)
    row, values = loaded
    db = database()
    changed = []
    for name in names:
        i = table.index[name]
        now = getattr(obj, table.attnames[i])
        if isinstance(values[i], (dict, list)):
            # The loaded object may have been changed in place: convert the row's value again
            # (``mark_saved`` keeps a copy instead).
            was = values[i]
            if row is not None:
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
    batch = current_batch()
    if batch is not None:
        cursor = batch.queue(sql, params)
        batch.sync()
        found = cursor.fetchall()
        cursor.close()
    else:
        with database().cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchall()
    return instances(model, found)


def select_later(
    model: type[M],
    where: str,
    params: Sequence[Any],
    *,
    lock: bool = False,
    order_by: str = "",
    limit: int | None = None,
) -> Callable[[], list[M]]:
    """``select`` queued in this thread's batch (``runs.store.pipeline.current_batch``);
    returns the function that reads its instances after the batch's next ``sync`` (called
    earlier, it waits for them: a round trip).

    Raises:
        RuntimeError: no batch is open.
    """
    batch = current_batch()
    if batch is None:
        raise RuntimeError("select_later needs an open batch")
    rows = batch.fetch_later(*_select_sql(model, where, params, lock, order_by, limit))
    return lambda: instances(model, rows())


def get(model: type[M], pk: Any, *, lock: bool = False) -> M:
    """The instance of ``model`` with primary key ``pk`` (locked with ``lock``).

    Raises:
        model.DoesNotExist: no such row.
        django.core.exceptions.ValidationError: ``pk`` is not a valid key (e.g. not a UUID).
    """
    field = model._meta.pk
    key = field.get_db_prep_value(field.to_python(pk), database())
    found = select(model, f"{field.column} = %s", [key], lock=lock)
    if not found:
        raise model.DoesNotExist(f"no {model._meta.model_name} {pk}")  # type: ignore[attr-defined]
    return found[0]


def _seconds(value: DatabaseTime, db: BaseDatabaseWrapper) -> float:
    return float(value.seconds)


@cache
def _update_sql(
    model: type[Model], names: tuple[str, ...], where: tuple[str, ...], clocked: frozenset[str]
) -> tuple[str, list[Adapter]]:
    """The UPDATE setting ``names`` of rows matching ``where`` (all by field name), those in
    ``clocked`` to the database's clock plus a parameter's seconds (``DatabaseTime``), and the
    adaptation of each of its parameters' values (``runs.store.adapt``), in order."""
    db = database()
    table = table_of(model)
    fields = [table.fields[name] for name in (*names, *where)]
    columns = [
        f"{db.ops.quote_name(str(f.column))} = "
        + (DatabaseTime.SQL if i < len(names) and f.name in clocked else "%s")
        for i, f in enumerate(fields)
    ]
    assignments = ", ".join(columns[: len(names)])
    conditions = " AND ".join(columns[len(names) :])
    sql = f"UPDATE {table.name} SET {assignments} WHERE {conditions}"  # noqa: S608 (no user input)
    adapters = [
        _seconds if i < len(names) and f.name in clocked else adapter_of(f, db.vendor)
        for i, f in enumerate(fields)
    ]
    return sql, adapters


def _update_params(
    model: type[Model], values: dict[str, Any], where: dict[str, Any]
) -> tuple[str, list[Any]]:
    """The UPDATE of ``update_where`` and its parameters. A ``DatabaseTime`` value is written
    as the database's clock on PostgreSQL, as this host's (the database's: one host) on
    SQLite."""
    db = database()
    clocked = frozenset(name for name, value in values.items() if isinstance(value, DatabaseTime))
    if clocked and db.vendor != "postgresql":
        values = {k: v.on_host() if k in clocked else v for k, v in values.items()}
        clocked = frozenset()
    sql, adapters = _update_sql(model, tuple(values), tuple(where), clocked)
    raw = [*values.values(), *where.values()]
    params = [adapt(value, db) for adapt, value in zip(adapters, raw, strict=True)]
    return sql, params


def update_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> int:
    """``UPDATE`` the rows of ``model`` whose fields equal ``where``, setting the fields of
    ``values`` (adapted as the ORM adapts them; a ``DatabaseTime`` as the database's clock);
    returns how many rows changed. Inside a batch,
    what it holds is sent with it (one round trip): use ``write_where`` when the count does
    not matter."""
    sql, params = _update_params(model, values, where)
    batch = current_batch()
    if batch is not None:
        cursor = batch.queue(sql, params)
        batch.sync()
        return int(cursor.rowcount)
    with database().cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def write_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> None:
    """``update_where`` without the count: inside a batch it is held and sent with the batch's
    other writes."""
    batch = current_batch()
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
    still has the values of ``guard`` (e.g. ``{"status": <status it was read with>}``). A
    field holding an ``agentops.clock.DatabaseTime`` is written as the database's clock plus
    its seconds, in the same statement.

    Raises:
        ConcurrentTransition: the row changed meanwhile (or is gone); inside a batch, from its
            next sync.
        TypeError: the model declares no ``UPDATED_FIELDS``.
    """
    model = type(obj)
    table = table_of(model)
    names = _changed(obj, table, updated_fields(model))
    values = {name: getattr(obj, table.fields[name].attname) for name in names}
    for name in table.auto_now:
        values[name] = table.fields[name].pre_save(obj, add=False)
    changed = ConcurrentTransition(f"{obj!r} changed since it was read ({guard})")
    sql, params = _update_params(model, values, {"pk": obj.pk, **guard})
    batch = current_batch()
    if batch is not None:
        batch.write(sql, params, table=model._meta.db_table, row=obj.pk, expect_one=changed)
    else:
        with database().cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.rowcount != 1:
                raise changed
    # Keep ConcurrentTransitionMixin's record of the saved status in step with the row, so
    # an ORM save of the same instance later is guarded by the new status.
    fsm_record_saved(obj)


# The django-fsm-2 releases whose ``ConcurrentTransitionMixin`` keeps the statuses an instance
# was saved with through ``_update_initial_state`` (what its own ``save`` calls).
FSM_SAVED_STATE_RELEASES = ("4.",)


@cache
def _fsm_saved_state_supported() -> bool:
    version = importlib.metadata.version("django-fsm-2")
    if version.startswith(FSM_SAVED_STATE_RELEASES):
        return True
    logger.warning(
        "django-fsm-2 %s: saved statuses are read back from the database (written for %s)",
        version,
        ", ".join(FSM_SAVED_STATE_RELEASES),
    )
    return False


def fsm_record_saved(obj: Model) -> None:
    """Tell ``obj``'s ``ConcurrentTransitionMixin`` (if it has one) that its statuses are
    saved, as its ``save`` would. On a django-fsm-2 release not in ``FSM_SAVED_STATE_RELEASES``
    the statuses are read back with Django's public ``refresh_from_db`` instead (one query),
    and a warning is logged once; ``tests/runs/store/test_rows.py::
    test_fsm_saved_state_is_recorded_on_the_installed_django_fsm`` fails on such a release."""
    if not isinstance(obj, ConcurrentTransitionMixin):
        return
    if _fsm_saved_state_supported():
        obj._update_initial_state()
    else:
        obj.refresh_from_db(fields=[field.attname for field in obj.state_fields])


def fetch(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows (tuples) of one query; inside a batch, what it holds is sent with it."""
    batch = current_batch()
    if batch is not None:
        return batch.fetch_later(sql, params)()
    with database().cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
