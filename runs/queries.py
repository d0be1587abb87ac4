"""Named queries of the runs app that stay in SQL: each with its measured reason and a test
against its ORM equivalent on the same data, or with no ORM equivalent at all
(``tests/runs/test_queries.py``)."""

from __future__ import annotations

import uuid

from django.db import connection

from runs.models import (
    Checkpoint,
    Compaction,
    Message,
    ModelCall,
    Run,
    StateVersion,
    Step,
    StepAttempt,
    ToolCall,
)

# The steps of a batch and the rows of this app hanging off them, in one statement: the
# statements of a WITH share a snapshot, and Django's foreign keys are checked at commit
# (DEFERRABLE INITIALLY DEFERRED), so children and parents may go together.
_DELETE_STEPS = f"""
WITH checkpoints AS (DELETE FROM {Checkpoint._meta.db_table} WHERE step_id = ANY(%(ids)s)),
attempts AS (DELETE FROM {StepAttempt._meta.db_table} WHERE step_id = ANY(%(ids)s)),
calls AS (DELETE FROM {ToolCall._meta.db_table} WHERE step_id = ANY(%(ids)s))
DELETE FROM {Step._meta.db_table} WHERE id = ANY(%(ids)s)
"""  # noqa: S608 (table names from the models; the ids are a bound parameter)


def steps_delete(*, step_ids: list[int]) -> int:
    """Delete the steps ``step_ids`` with their checkpoints, attempts and tool calls in one
    statement (PostgreSQL only); returns how many steps were deleted. The ORM equivalent is
    ``Step.objects.filter(pk__in=step_ids).delete()`` once other apps' rows are gone
    (``runs.retention.DependentRows``).

    Why SQL: retention deletes 1M steps in batches of 1000 (``benchmarks/README.md``, row
    "retention | purge rate (baseline: plain SQL batches)": 16.8k steps/s, about 60 ms a
    batch, against 21.5k for bare ``DELETE`` batches, run D). Django's ``delete()`` of a
    batch reads the 1000 steps back as model instances (JSON arguments and results), then
    deletes each child table in its own statement: 555 ms a batch of 1000 echo steps
    against 50 ms for this statement (medians of 8 alternated batches in rolled-back
    transactions, 2026-11-28), which would take the purge rate to a tenth.
    """
    with connection.cursor() as cursor:
        cursor.execute(_DELETE_STEPS, {"ids": step_ids})
        return cursor.rowcount


# A run's own rows that retention deletes with it once its steps are gone (other apps' rows
# go first, through ``runs.retention.DependentRows``); forks of these runs outlive them
# (``Run.forked_from`` is SET_NULL, which Django, not the database, would do).
_DELETE_RUNS = [
    f"DELETE FROM {model._meta.db_table} WHERE run_id = ANY(%s)"  # noqa: S608
    for model in (ModelCall, StateVersion, Compaction, Message)
] + [
    f"UPDATE {Run._meta.db_table} SET forked_from_id = NULL WHERE forked_from_id = ANY(%s)",  # noqa: S608
    f"DELETE FROM {Run._meta.db_table} WHERE id = ANY(%s)",  # noqa: S608
]


def runs_delete(*, run_ids: list[uuid.UUID]) -> int:
    """Delete the runs ``run_ids`` whose steps and other apps' rows are already gone, with
    their model calls, state versions, compactions and messages, forks of them kept
    (PostgreSQL only); returns how many runs were deleted. The ORM equivalent is
    ``Run.objects.filter(pk__in=run_ids).delete()``.

    Why SQL: the same retention row as ``steps_delete`` (10,000 runs in chunks of 500).
    Django's ``delete()`` reads the runs back as model instances (goals, inputs, states) and
    asks each of the dozen tables that refer to a run for rows: 243 ms against 3.9 ms for
    these statements for 86 runs (fastest of 6 alternated, rolled back, 2026-11-28), about
    1.4 s a chunk of 500 runs against the 3 s its 50,000 steps take, which would take about
    a third off the purge rate.
    """
    with connection.cursor() as cursor:
        for statement in _DELETE_RUNS:
            cursor.execute(statement, [run_ids])
        return cursor.rowcount


def advisory_lock_try(*, key: int) -> bool:
    """Take PostgreSQL's session-level advisory lock ``key`` (a signed 64-bit integer) for
    this database session if it is free; whether it was taken. It outlives transactions
    until ``advisory_lock_release``; Django's ORM has no expression for it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        (taken,) = cursor.fetchone()
    return bool(taken)


def advisory_lock_release(*, key: int) -> None:
    """Release the advisory lock ``key`` this database session holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
