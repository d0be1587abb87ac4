"""Writing one transition: lock the rows, save what the FSM changed, record the audit event.

Every service of runs (and of the gate kinds above it) changes runs and steps through these.
Lock order, everywhere, to rule out deadlocks: the run row, then its session's row (a run in
a session appending messages), then its step rows, then a gate's own rows (an approval
request), then the audit chain (taken inside ``audit_record``). A service that changes a
session alone locks only the session row.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Sequence
from typing import Any, cast

from agentops import rows
from agentops.actors import Actor
from audit.models import session_chain
from audit.services import audit_record
from runs.models import AgentSession, Run, Step
from runs.statuses import run_status_info, step_status_info


def lock_run(run_id: uuid.UUID | str) -> Run:
    """The run row, locked until the transaction ends (``SELECT ... FOR UPDATE``).

    Raises:
        Run.DoesNotExist: unknown id.
    """
    return rows.get(Run, run_id, lock=True)


def lock_session(session_id: uuid.UUID | str) -> AgentSession:
    """The session row, locked until the transaction ends (``SELECT ... FOR UPDATE``); a
    caller that changes a run of the session locks the run first.

    Raises:
        AgentSession.DoesNotExist: unknown id.
    """
    return AgentSession.objects.select_for_update().get(pk=session_id)


def save_session(session: AgentSession) -> None:
    """Write what changed in a locked session (``AgentSession.UPDATED_FIELDS``)."""
    session.save(update_fields=AgentSession.UPDATED_FIELDS)


def record_session_event(
    actor: Actor, session: AgentSession, event: str, *, from_state: str = "", **payload: Any
) -> None:
    """Write the audit event of a change to a locked session, in its own chain
    (``audit.models.session_chain``): the verb is ``session.<event>``
    (``session.items_added``), the from state ``from_state`` (default: its status now) and
    the to state its status."""
    audit_record(
        actor=actor,
        verb=f"session.{event}",
        object_type="session",
        object_id=session.pk,
        project_id=session.project_id,
        from_state=from_state or session.status,
        to_state=session.status,
        payload=payload,
        chain=session_chain(session.pk),
    )


def lock_run_of_step(step_id: int) -> Run | None:
    """The run of step ``step_id``, locked like ``lock_run`` (one query), or None when there
    is no such step. Lock the step itself afterwards: runs are always locked first."""
    found = rows.select(
        Run, "id = (SELECT run_id FROM runs_step WHERE id = %s)", [step_id], lock=True
    )
    return found[0] if found else None


def lock_step(step_id: int) -> Step:
    """The step row, locked until the transaction ends; lock its run first.

    Raises:
        Step.DoesNotExist: unknown id.
    """
    return rows.get(Step, step_id, lock=True)


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


def save_run(run: Run) -> None:
    """Write what changed in a locked run (``Run.UPDATED_FIELDS``) and bump its ``version``.

    Raises:
        ConcurrentTransition: the row's version is not the one it was read with.
    """
    read_version = run.version
    run.version += 1
    rows.update(run, guard={"version": read_version})


def save_step(step: Step, *, status_was: str) -> None:
    """Write what changed in a locked step (``Step.UPDATED_FIELDS``) that had status
    ``status_was`` when read.

    Raises:
        ConcurrentTransition: the row's status is no longer ``status_was``.
    """
    rows.update(step, guard={"status": status_was})


@functools.lru_cache(maxsize=4096)
def _project_of_run(run_id: uuid.UUID) -> int:
    # A run never changes project, so a process may remember it: the executor records a
    # step's transitions without loading the step's run object.
    return Run.objects.values_list("project_id", flat=True).get(pk=run_id)


def _project_id(obj: Run | Step) -> int:
    if isinstance(obj, Run):
        return obj.project_id
    step = cast(Step, obj)
    run = step._state.fields_cache.get("run")
    return run.project_id if run is not None else _project_of_run(step.run_id)


def record_event(actor: Actor, obj: Run | Step, event: str, **payload: Any) -> None:
    """Write the audit event of a change to a run or step that is not a transition (its
    status stays): the verb is ``<run|step>.<event>`` (``run.messages_appended``) and from
    and to states are both its status as shown."""
    is_run = isinstance(obj, Run)
    shown = obj.status_info.value
    object_type = "run" if is_run else "step"
    audit_record(
        actor=actor,
        verb=f"{object_type}.{event}",
        object_type=object_type,
        object_id=obj.pk,
        run_id=cast(uuid.UUID, obj.run_id if isinstance(obj, Step) else obj.pk),
        project_id=_project_id(obj),
        from_state=shown,
        to_state=shown,
        payload=payload,
    )


def record_transition(
    actor: Actor, obj: Run | Step, from_state: str, *, from_gate: str | None = None, **payload: Any
) -> None:
    """Write the audit event of one transition of a run or step: ``from_state`` is its stored
    status before (empty for its creation) and ``from_gate`` the gate kind it waited at then
    (default: its ``gate`` now; give it when a run leaves a gate).

    The verb is ``<run|step>.<status as shown>`` (``step.succeeded``, ``run.awaiting_approval``),
    or ``<run|step>.created``; from and to states are the statuses as shown (``runs.statuses``).
    """
    is_run = isinstance(obj, Run)
    run_id = cast(uuid.UUID, obj.run_id if isinstance(obj, Step) else obj.pk)
    gate = obj.gate if from_gate is None else from_gate
    shown = obj.status_info.value
    was = ""
    if from_state:
        was = (run_status_info if is_run else step_status_info)(from_state, gate).value
    object_type = "run" if is_run else "step"
    audit_record(
        actor=actor,
        verb=f"{object_type}.{shown}" if from_state else f"{object_type}.created",
        object_type=object_type,
        object_id=obj.pk,
        run_id=run_id,
        project_id=_project_id(obj),
        from_state=was,
        to_state=shown,
        payload=payload,
    )
