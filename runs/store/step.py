"""The locked reads of a step's transaction, each in one round trip, and what a claim leaves
for the transaction that records the step's outcome (``Ahead``).

Recording an outcome locks the run, the step and the run's first other open step, then the
run's audit chain head, and reserves event ids under that lock (lock order:
``runs.transitions``). A transaction that claims the run's next step leaves what the next
recording reads (``Ahead``): that recording then checks it in the database instead of reading
it, in the same round trip as its writes and COMMIT, and reads it only when the check fails
(``StaleAhead``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from audit.chain import run_head_sql
from audit.models import run_chain
from audit.services import ChainHeads, audit_prefetched
from runs.models import Run, Step
from runs.statuses import OPEN_STEP_STATUSES, StepStatus
from runs.store import rows
from runs.store.audit import prefetch_chains, reserve_ids_later
from runs.store.locks import status_in
from runs.store.pipeline import Batch, current_batch

# Audit events of the usual step transaction: the step succeeded, the next one queued and
# claimed (ids reserved with the transaction's first reads).
USUAL_EVENTS = 3
# Open steps read at once for the claims ahead (``leave_ahead``): one read, and one
# reservation of event ids, for this many steps of a run.
_AHEAD_STEPS = 8


@dataclass
class Ahead:
    """What the transaction that claimed a step left as it committed, for the transaction
    that records the step's outcome, which then checks it instead of reading it: the run
    (``version`` as committed); the run's open steps after the claimed one, in order, as they
    were when read (``steps``: the first is the next to claim), and whether they were all of
    them (``complete``); the run's audit chain head (events, last event id, last hash) and
    event ids reserved for that chain, in order."""

    run: Run
    steps: list[Step]
    complete: bool
    head: tuple[int, int, str]
    ids: list[int]


class StaleAhead(Exception):
    """What a claim's transaction left for recording its outcome (``Ahead``) no longer holds:
    another transaction changed the run, the claimed step, the run's next open step or its
    audit chain since. The recording transaction rolls back and runs again, reading them."""


def _batch() -> Batch:
    batch = current_batch()
    if batch is None:
        raise RuntimeError("a step's reads need a pipelined_atomic block")
    return batch


def _open_after(run: str, step: str) -> str:
    """The SQL condition "an open step of run ``run`` other than ``step``" (SQL expressions)."""
    return f"run_id = {run} AND {status_in(OPEN_STEP_STATUSES)} AND id <> {step}"


@cache
def _record_reads_sql() -> str:
    """The locked reads of ``lock_for_record`` as one statement (PostgreSQL): the run, the
    step, the run's first other open step, then the run's audit chain head. Each LATERAL part
    names the one before it, so PostgreSQL joins, and so locks, them in that order (lock
    order: ``runs.transitions``)."""
    run_table, step_table = Run._meta.db_table, Step._meta.db_table
    steps = rows.column_list(Step)
    return f"""
SELECT r.*, s.*, n.*, h.events, h.last_event_id, h.last_hash
FROM (SELECT {rows.column_list(Run)} FROM {run_table} WHERE id = %s FOR UPDATE) r
CROSS JOIN LATERAL (
    SELECT {steps} FROM {step_table} WHERE id = %s AND run_id = r.id FOR UPDATE
) s
LEFT JOIN LATERAL (
    SELECT {steps} FROM {step_table} WHERE {_open_after("s.run_id", "s.id")}
    ORDER BY "index" LIMIT 1 FOR UPDATE
) n ON true
LEFT JOIN LATERAL ({run_head_sql("COALESCE(n.run_id, s.run_id)")}) h ON true
"""  # noqa: S608


@cache
def _ahead_check_sql() -> str:
    """The check of a claim's ``Ahead`` as one SELECT (PostgreSQL) that finds one row only if
    the run still has the version the claim committed, the claimed step is still running its
    attempt, the run's first other open step is still the one (with the status and
    ``updated_at``) read then, or still none, and the run's audit chain head is still the one
    the claim wrote, its last event's id below the first id reserved for this transaction (so
    the chain's events still commit in id order). It takes the same locks as
    ``_record_reads_sql``, in the same order."""
    run_table, step_table = Run._meta.db_table, Step._meta.db_table
    return f"""
SELECT 1
FROM (SELECT id, version FROM {run_table} WHERE id = %s FOR UPDATE) r
CROSS JOIN LATERAL (
    SELECT id, run_id, status, attempts FROM {step_table} WHERE id = %s AND run_id = r.id
    FOR UPDATE
) s
LEFT JOIN LATERAL (
    SELECT id, run_id, status, updated_at FROM {step_table} WHERE {_open_after("s.run_id", "s.id")}
    ORDER BY "index" LIMIT 1 FOR UPDATE
) n ON true
LEFT JOIN LATERAL ({run_head_sql("COALESCE(n.run_id, s.run_id)")}) h ON true
WHERE r.version = %s AND s.status = '{StepStatus.RUNNING}' AND s.attempts = %s
    AND n.id IS NOT DISTINCT FROM %s AND n.status IS NOT DISTINCT FROM %s
    AND n.updated_at IS NOT DISTINCT FROM %s
    AND h.events = %s AND h.last_event_id = %s AND h.last_event_id < %s
"""  # noqa: S608


def check_ahead(step: Step, ahead: Ahead) -> tuple[Run, Step, list[Step]]:
    """Send the check of ``ahead`` (``_ahead_check_sql``) for the claimed ``step`` without
    waiting for it, and take what it stands for as read: the run, a copy of the step
    (``step`` stays as it was, for the transaction that runs again if the check fails) and the
    next open step; the chain head and the reserved event ids go to the audit writer. The
    commit fails with ``StaleAhead`` when the check found no row."""
    run = ahead.run
    upcoming = ahead.steps[0] if ahead.steps else None
    _batch().expect_later(
        _ahead_check_sql(),
        [
            run.pk,
            step.pk,
            run.version,
            step.attempts,
            upcoming.pk if upcoming else None,
            upcoming.status if upcoming else None,
            upcoming.updated_at if upcoming else None,
            ahead.head[0],
            ahead.head[1],
            ahead.ids[0],
        ],
        StaleAhead(f"run {run.pk} changed since step {step.pk} was claimed"),
    )
    chain, head, ids = run_chain(run.pk), ahead.head, ahead.ids
    audit_prefetched(chains=[chain], read_heads=lambda: [(chain, *head)], read_ids=lambda: ids)
    return run, rows.clone(step), ahead.steps[:1]


def lock_for_record(step: Step) -> tuple[Run, Step, list[Step]]:
    """Lock the claimed ``step``'s run, the step and the run's first other open step, and read
    the audit chain's head and reserve ``USUAL_EVENTS`` event ids, in one round trip (on PostgreSQL
    two statements, ``_record_reads_sql`` then the reservation, which runs after it and so
    under the head's lock)."""
    batch = _batch()
    run_id, step_id = step.run_id, step.pk
    if not batch.pipelined:
        return lock_for_report(run_id, step_id, USUAL_EVENTS)
    read = batch.fetch_later(_record_reads_sql(), [run_id, step_id])
    read_ids = reserve_ids_later(USUAL_EVENTS)
    batch.sync()
    ((*found, events_in, last_id, last_hash),) = read()
    runs, steps = rows.width(Run), rows.width(Step)
    run = rows.instances(Run, [found[:runs]])[0]
    locked = rows.instances(Step, [found[runs : runs + steps]])[0]
    upcoming = found[runs + steps :]
    chain = run_chain(run_id)
    heads = [] if events_in is None else [(chain, events_in, last_id, last_hash)]
    audit_prefetched(chains=[chain], read_heads=lambda: heads, read_ids=read_ids)
    return run, locked, [] if upcoming[0] is None else rows.instances(Step, [upcoming])


def lock_for_report(run_id: uuid.UUID, step_id: int, events: int) -> tuple[Run, Step, list[Step]]:
    """Lock the run, its step ``step_id`` and its first other open step, and queue the audit
    chain's head and ``events`` event ids, in one round trip (lock order: ``runs.transitions``).

    Raises:
        Run.DoesNotExist, Step.DoesNotExist: no such run, or no such step in it.
    """
    batch = _batch()
    read_run = rows.select_later(Run, "id = %s", [run_id], lock=True)
    read_step = rows.select_later(Step, "id = %s AND run_id = %s", [step_id, run_id], lock=True)
    read_next = rows.select_later(
        Step, _open_after("%s", "%s"), [run_id, step_id], lock=True, order_by='"index"', limit=1
    )
    prefetch_chains([run_chain(run_id)], events)
    batch.sync()
    found_run, found_step = read_run(), read_step()
    if not found_run:
        raise Run.DoesNotExist(f"no run {run_id}")
    if not found_step:
        raise Step.DoesNotExist(f"run {run_id} has no step {step_id}")
    return found_run[0], found_step[0], read_next()


def leave_ahead(
    run: Run, claimed: Step | None, ahead: Ahead | None
) -> Callable[[ChainHeads], Ahead | None] | None:
    """Inside the recording transaction (pipelined), once its writes are made: when it
    claimed a step (``claimed``), what the next recording transaction needs. The rest of
    ``ahead`` (what this transaction checked) serves while it holds the steps after the
    claimed one and event ids; otherwise queue the reads: the run's next ``_AHEAD_STEPS`` open
    steps and event ids for as many steps, reserved under the chain's lock. Returns the
    function that, after the commit, makes the claim's ``Ahead`` (None: none can be made)."""
    batch = current_batch()
    if claimed is None or batch is None or not batch.pipelined:
        return None
    chain = run_chain(run.pk)
    if ahead is not None and ahead.steps and claimed is ahead.steps[0]:
        carried = _carry_on(run, claimed, ahead, chain)
        if carried is not None:
            return carried
    read_steps = rows.select_later(
        Step,
        _open_after("%s", "%s"),
        [run.pk, claimed.pk],
        order_by='"index"',
        limit=_AHEAD_STEPS,
    )
    read_ids = reserve_ids_later(USUAL_EVENTS * _AHEAD_STEPS)

    def read(moved: ChainHeads) -> Ahead | None:
        head = moved.get(chain)
        if head is None:
            return None
        steps = read_steps()
        made = Ahead(run, steps, len(steps) < _AHEAD_STEPS, head, read_ids())
        return _committed(run, claimed, made)

    return read


def _carry_on(
    run: Run, claimed: Step, ahead: Ahead, chain: str
) -> Callable[[ChainHeads], Ahead | None] | None:
    """The rest of ``ahead`` for the claim after ``claimed`` (its first step), while ``ahead``
    still holds steps after it, or all of them; None: read them again."""
    rest, complete = ahead.steps[1:], ahead.complete
    if not (rest or complete):
        return None

    def carry_on(moved: ChainHeads) -> Ahead | None:
        head = moved.get(chain)
        if head is None or len(moved) != 1:
            return None  # ids went to another chain's events too: read again
        ids = ahead.ids[head[0] - ahead.head[0] :]
        if len(ids) < USUAL_EVENTS:
            return None
        return _committed(run, claimed, Ahead(run, rest, complete, head, ids))

    return carry_on


def _committed(run: Run, claimed: Step, ahead: Ahead) -> Ahead:
    """``ahead``, once the transaction that wrote ``run`` and claimed ``claimed`` committed:
    their rows now hold what the two instances hold."""
    rows.mark_saved(run)
    rows.mark_saved(claimed)
    return ahead


def _next_index_sql() -> str:
    """The run's number of steps, as the index its next step takes (a run's steps are numbered
    from 0 without gaps; no row for a run without steps): the newest entry of the unique (run,
    index) index, where ``count(*)`` would read every step of the run, on every append of a
    session that appends hundreds. Written as ORDER BY ... LIMIT 1, not ``max()``, which the
    planner may compute by reading them all when its statistics say a run has few steps."""
    table = Step._meta.db_table
    return f'SELECT "index" + 1 FROM {table} WHERE run_id = %s ORDER BY "index" DESC LIMIT 1'  # noqa: S608


def _reserve_step_key_sql() -> str:
    return f"SELECT nextval(pg_get_serial_sequence('{Step._meta.db_table}', 'id'))"


def lock_for_append(
    run_id: uuid.UUID | str, repeat_of: str, events: int
) -> tuple[Run, int, list[Step], list[int], list[Step]]:
    """In one round trip: the run locked, its step count, its first open step (locked), a
    reserved key for the new step (PostgreSQL), the audit chain's head and ``events`` event
    ids, and (``repeat_of``, a ``tool_call_id``) the run's last open step of that call.

    Raises:
        Run.DoesNotExist: unknown run.
    """
    batch = _batch()
    read_run = rows.select_later(Run, "id = %s", [run_id], lock=True)
    read_count = batch.fetch_later(_next_index_sql(), [run_id])
    open_steps = status_in(OPEN_STEP_STATUSES)
    read_open = rows.select_later(
        Step, f"run_id = %s AND {open_steps}", [run_id], lock=True, order_by='"index"', limit=1
    )
    read_key = batch.fetch_later(_reserve_step_key_sql(), []) if batch.pipelined else None
    read_repeat = None
    if repeat_of:
        read_repeat = rows.select_later(
            Step,
            f"run_id = %s AND tool_call_id = %s AND {open_steps}",
            [run_id, repeat_of],
            order_by='"index" DESC',
            limit=1,
        )
    prefetch_chains([run_chain(run_id)], events)
    batch.sync()
    found = read_run()
    if not found:
        raise Run.DoesNotExist(f"no run {run_id}")
    count = next((after for (after,) in read_count()), 0)
    keys = [key for (key,) in read_key()] if read_key is not None else []
    repeat = read_repeat() if read_repeat is not None else []
    return found[0], count, read_open(), keys, repeat
