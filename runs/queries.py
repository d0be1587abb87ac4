"""Named queries of the runs app that stay in SQL: each with its measured reason and a test
against its ORM equivalent on the same data, or with no ORM equivalent at all
(``tests/runs/test_queries.py``)."""

from __future__ import annotations

from django.db import connection

from runs.models import Checkpoint, Step, StepAttempt, ToolCall

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
