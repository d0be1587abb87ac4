"""Plain-SQL reads of rows, for the executor's hot path; ``runs.store.writes`` writes them
back.

Building and compiling a query costs the ORM about half a millisecond of Python per statement
on a 2-core machine, two to three times what the statement itself costs; a step makes a dozen
of them, so the services that claim steps, record their outcomes and advance runs read and
write their rows in this package instead (figures: ``benchmarks/README.md``, "What bounds each
figure", and ``benchmarks/HISTORY.md``).

Rows are still model instances: built by ``Model.from_db``, with each field's own database
converters, and each keeps the row it was loaded from (``LOADED``), so that writing it back
(``runs.store.writes.update``) writes only the fields whose values differ. The SQL of each
statement shape is built once per process.

Inside ``runs.store.pipeline.batch()`` (PostgreSQL) statements are pipelined: reads queued with
``select_later`` are answered together with the writes held before them, so a transaction of
a dozen statements costs a few round trips instead of a dozen.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypedDict, TypeVar, Unpack

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from runs.store.pipeline import current_batch

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]

# The row an instance was loaded from: (the row as the database sent it, its converted values);
# ``runs.store.writes`` compares an instance with it to write only what changed.
LOADED = "_agentops_rows_loaded"


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


class SelectOptions(TypedDict, total=False):
    """How ``select`` and ``select_later`` read rows: ``lock`` (default False) adds ``FOR
    UPDATE`` (where the database has it), so the rows stay locked until the transaction ends;
    ``order_by`` is an SQL ordering (default none), ``limit`` a row count (default None: no
    limit)."""

    lock: bool
    order_by: str
    limit: int | None


def _select_sql(
    model: type[Model], where: str, params: Sequence[Any], options: SelectOptions
) -> tuple[str, Sequence[Any]]:
    db = database()
    order_by, limit = options.get("order_by", ""), options.get("limit")
    if not db.features.has_native_uuid_field:
        params = [p.hex if isinstance(p, uuid.UUID) else p for p in params]
    sql = f"SELECT {table_of(model).columns} FROM {table_of(model).name} WHERE {where}"  # noqa: S608
    if order_by:
        sql += f" ORDER BY {order_by}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    if options.get("lock", False) and db.features.has_select_for_update:
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
        setattr(obj, LOADED, (row, values[:]))
        objs.append(obj)
    return objs


def mark_saved(obj: Model) -> None:
    """Record that the row of ``obj`` now holds the instance's values (a transaction that
    wrote them has committed): a later ``update`` of it writes only what changes after this.
    Its JSON values are copied, so that changing them in place later counts as a change."""
    table = table_of(type(obj))
    values = [getattr(obj, attname) for attname in table.attnames]
    copies = [copy.deepcopy(v) if isinstance(v, (dict, list)) else v for v in values]
    obj.__dict__[LOADED] = (None, copies)


def clone(obj: M) -> M:
    """A separate instance with the same values as ``obj`` (JSON values shared, not copied:
    assign new ones rather than change them in place) and the same record of what its row
    holds, for changes that may be given up without touching ``obj`` (``copy.copy``, which
    Django's ``Model.__getstate__`` gives a state of its own)."""
    return copy.copy(obj)


def select(
    model: type[M], where: str, params: Sequence[Any], **options: Unpack[SelectOptions]
) -> list[M]:
    """Instances of ``model`` whose rows match the SQL condition ``where`` (``%s`` parameters;
    UUIDs are passed as the database stores them), read as ``options`` say. Inside a batch,
    what was queued before is sent with it (one round trip: ``select_later``, then a sync).
    """
    batch = current_batch()
    if batch is not None:
        read = select_later(model, where, params, **options)
        batch.sync()
        return read()
    with database().cursor() as cursor:
        cursor.execute(*_select_sql(model, where, params, options))
        found = cursor.fetchall()
    return instances(model, found)


def select_later(
    model: type[M], where: str, params: Sequence[Any], **options: Unpack[SelectOptions]
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
    rows = batch.fetch_later(*_select_sql(model, where, params, options))
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


def fetch(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows (tuples) of one query; inside a batch, what it holds is sent with it."""
    batch = current_batch()
    if batch is not None:
        return batch.fetch_later(sql, params)()
    with database().cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
