"""Locking runs and steps (lock order: ``runs.transitions``): each lock is one ``SELECT ...
FOR UPDATE`` of the rows as ``runs.store.rows`` reads them. ``runs.store.writes`` saves them."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Sequence

from runs.models import Run, Step
from runs.statuses import RunStatus
from runs.store import rows


def lock_run(run_id: uuid.UUID | str) -> Run:
    """The run row, locked until the transaction ends (``SELECT ... FOR UPDATE``).

    Raises:
        Run.DoesNotExist: unknown id.
    """
    return rows.get(Run, run_id, lock=True)


def lock_run_of_step(step_id: int) -> Run | None:
    """The run of step ``step_id``, locked like ``lock_run`` (one query), or None when there
    is no such step. Lock the step itself afterwards: runs are always locked first."""
    found = rows.select(
        Run,
        f"id = (SELECT run_id FROM {Step._meta.db_table} WHERE id = %s)",  # noqa: S608
        [step_id],
        lock=True,
    )
    return found[0] if found else None


def lock_step(step_id: int) -> Step:
    """The step row, locked until the transaction ends; lock its run first.

    Raises:
        Step.DoesNotExist: unknown id.
    """
    return rows.get(Step, step_id, lock=True)


def lock_step_of_running_run(step_id: int, status: str) -> tuple[Run, Step] | None:
    """The run of step ``step_id`` and the step, both locked (the run first), when the step
    has ``status`` and its run is running; None otherwise (no such step, or a duplicate or
    late wake-up: nothing to do)."""
    run = lock_run_of_step(step_id)
    if run is None:
        return None
    step = lock_step(step_id)
    if step.status != status or run.status != RunStatus.RUNNING:
        return None
    return run, step


def status_in(statuses: Sequence[str]) -> str:
    """The SQL condition "a step's status is one of ``statuses``" (open statuses, a run's
    steps picked with ``run_id = ...``), the statuses written out as literals: PostgreSQL
    then reads the run's open steps from ``step_open_idx``, the partial index of open steps
    by run and index, whose condition it can prove only from literals (a bind parameter
    proves nothing in a cached generic plan). Through ``step_status_idx``, the sweeper's
    index over every run, a step's lookup read every open step of every run and the dead
    entries each status change leaves (74,000 entries, 1.4 ms, in a database with 16,000
    pending steps); through the run's steps, it read all the run's finished steps
    (``benchmarks/HISTORY.md``, 2026-11-25, 14:03 and 15:00).

    Raises:
        ValueError: a status that is not a plain lower-case name.
    """
    return _status_in(tuple(statuses))


@functools.cache
def _status_in(statuses: tuple[str, ...]) -> str:
    for status in statuses:
        if not re.fullmatch(r"[a-z_]+", status):
            raise ValueError(f"not a step status: {status!r}")
    listed = ", ".join(f"'{status}'" for status in statuses)
    return f"status IN ({listed})"


def lock_steps(run: Run, statuses: Sequence[str], *, limit: int | None = None) -> list[Step]:
    """The steps of a locked run that have one of ``statuses``, in index order, locked."""
    return rows.select(
        Step,
        f"run_id = %s AND {status_in(statuses)}",
        [run.pk],
        lock=True,
        order_by='"index"',
        limit=limit,
    )
