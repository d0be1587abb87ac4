"""The rows the executor inserts, and the columns it changes without a transition (attempts,
ledger rows, a step's gate or arguments), through ``runs.store.rows``: inside a pipelined
transaction each is held and sent with its other writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db.models import Model

from runs.models import Step, StepAttempt, ToolCall
from runs.store import inserts, rows

M = TypeVar("M", bound=Model)


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
    return rows.update_where(Step, values, where)


def step_change_later(step_id: int, values: dict[str, Any]) -> None:
    """``step_change`` without the count: held and sent with the transaction's other writes."""
    rows.write_where(Step, values, {"pk": step_id})


def attempt_finish(step_id: int, number: int, values: dict[str, Any]) -> None:
    """Write the outcome ``values`` (status, finished_at, duration_ms, error) of attempt
    ``number`` of step ``step_id``."""
    rows.write_where(StepAttempt, values, {"step_id": step_id, "number": number})


def ledger_insert(call: ToolCall) -> None:
    """INSERT the ledger row of a new idempotency key."""
    inserts.insert([call], returning=False)


def ledger_change(key: str, attempt: int, values: dict[str, Any]) -> None:
    """Set ``values`` in the ledger row of ``key`` while it still belongs to ``attempt``."""
    rows.write_where(ToolCall, values, {"idempotency_key": key, "attempt": attempt})


def ledger_upsert(call: ToolCall, fields: Sequence[str]) -> None:
    """INSERT the ledger row ``call``, or set ``fields`` of the row of its key."""
    inserts.upsert(call, key="idempotency_key", fields=fields)
