"""Writing rows back, for the executor's hot path: a locked run or step's changed fields
(``save_run``, ``save_step``), the rows the executor inserts, and the columns it changes
without a transition (attempts, ledger rows, a step's gate or arguments).

Each value is adapted as the ORM adapts it (``get_db_prep_save``, ``pre_save`` for ``auto_now``
fields; skipped where it would return the value as it is: ``runs.store.adapt``), so JSON, UUIDs
and datetimes mean the same as through the ORM, on PostgreSQL and on the SQLite of a quick local
start. An instance read by ``runs.store.rows`` writes back only the fields whose values differ
from the row it was loaded from. Every write of a run or step names a guard (the status or
version the row was read with, like django-fsm's ``ConcurrentTransitionMixin``); a write that
finds the row changed raises ``ConcurrentTransition``.

Inside ``runs.store.pipeline.batch()`` (PostgreSQL) writes whose answers are not read
(``write_where``, ``update``; ``runs.store.inserts``' ``insert`` without ``returning``,
``upsert`` and ``execute``) are held and sent together with the batch's next reads or its
commit, and a guarded write is checked by the database before the commit.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django_fsm import ConcurrentTransition, ConcurrentTransitionMixin

from agentops.clock import DatabaseTime
from runs.models import Run, Step, StepAttempt, ToolCall
from runs.store import inserts
from runs.store.adapt import Adapter, adapter_of
from runs.store.pipeline import Write, current_batch
from runs.store.rows import LOADED, Table, database, table_of

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Model)


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
    loaded = obj.__dict__.pop(LOADED, None)
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
    batch.write(Write(sql, params, table=model._meta.db_table, row=row))


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
    inserts.execute(Write(sql, params, table=model._meta.db_table, row=obj.pk, expect_one=changed))
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


def save_run(run: Run) -> None:
    """Write what changed in a locked run (``Run.UPDATED_FIELDS``) and bump its ``version``.

    Raises:
        ConcurrentTransition: the row's version is not the one it was read with.
    """
    read_version = run.version
    run.version += 1
    update(run, guard={"version": read_version})


def save_step(step: Step, *, status_was: str) -> None:
    """Write what changed in a locked step (``Step.UPDATED_FIELDS``) that had status
    ``status_was`` when read.

    Raises:
        ConcurrentTransition: the row's status is no longer ``status_was``.
    """
    update(step, guard={"status": status_was})


def insert_new(objs: Sequence[M], *, read_keys: bool = False) -> Sequence[M]:
    """INSERT new rows of one model (steps, attempts, checkpoints, messages) in one statement,
    their fields prepared as ``Model.save`` prepares them; with ``read_keys``, the keys the
    database gives are read back into them (one round trip), else the INSERT is held. Returns
    ``objs``."""
    return inserts.insert(objs, returning=read_keys)


def step_change(step_id: int, values: dict[str, Any], *, status: str | None = None) -> int:
    """Set the fields ``values`` of step ``step_id`` (of its status ``status``, when given)
    without a transition (its gate, its arguments); returns how many rows changed (0 when
    the status moved on)."""
    where: dict[str, Any] = {"pk": step_id} if status is None else {"pk": step_id, "status": status}
    return update_where(Step, values, where)


def step_change_later(step_id: int, values: dict[str, Any]) -> None:
    """``step_change`` without the count: held and sent with the transaction's other writes."""
    write_where(Step, values, {"pk": step_id})


def attempt_finish(step_id: int, number: int, values: dict[str, Any]) -> None:
    """Write the outcome ``values`` (status, finished_at, duration_ms, error) of attempt
    ``number`` of step ``step_id``."""
    write_where(StepAttempt, values, {"step_id": step_id, "number": number})


def ledger_insert(call: ToolCall) -> None:
    """INSERT the ledger row of a new idempotency key."""
    inserts.insert([call], returning=False)


def ledger_change(key: str, attempt: int, values: dict[str, Any]) -> None:
    """Set ``values`` in the ledger row of ``key`` while it still belongs to ``attempt``."""
    write_where(ToolCall, values, {"idempotency_key": key, "attempt": attempt})


def ledger_upsert(call: ToolCall, fields: Sequence[str]) -> None:
    """INSERT the ledger row ``call``, or set ``fields`` of the row of its key."""
    inserts.upsert(call, key="idempotency_key", fields=fields)
