"""Writing one transition: lock the rows, save what the FSM changed, record the audit event.

Every service of runs (and of the gate kinds above it) changes runs and steps through these.
Lock order, everywhere, to rule out deadlocks: the run row, then its session's row (a run in
a session appending messages), then its step rows, then a gate's own rows (an approval
request), then the audit chain (taken inside ``audit_record``). A service that changes a
session alone locks only the session row.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, cast

from agentops.actors import Actor
from audit.models import session_chain
from audit.services import audit_record
from runs.models import AgentSession, Run, Step
from runs.statuses import run_status_info, step_status_info
from runs.store.locks import (
    lock_run,
    lock_run_of_step,
    lock_step,
    lock_steps,
    status_in,
)
from runs.store.writes import save_run, save_step

# Locking and saving live in the persistence seam (``runs.store.locks``,
# ``runs.store.writes``); services take them from here, with the audit side of a transition.
__all__ = [
    "lock_run",
    "lock_run_of_step",
    "lock_session",
    "lock_step",
    "lock_steps",
    "record_event",
    "record_session_event",
    "record_transition",
    "save_run",
    "save_session",
    "save_step",
    "status_in",
    "transition",
]


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


@functools.lru_cache(maxsize=4096)
def _project_of_run(run_id: uuid.UUID) -> int:
    # A run never changes project, so a process may remember it: the executor records a
    # step's transitions without loading the step's run object.
    return Run.objects.values_list("project_id", flat=True).get(pk=run_id)


def _project_id(obj: Run | Step) -> int:
    if isinstance(obj, Run):
        return obj.project_id
    step = cast(Step, obj)
    # A step built with its run object holds it (``is_cached``: Django's public check); one
    # loaded by the executor holds only its run's id.
    if Step._meta.get_field("run").is_cached(step):
        return cast(int, step.run.project_id)
    return _project_of_run(step.run_id)


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


def transition(
    obj: Run | Step,
    name: str,
    *,
    actor: Actor,
    payload: dict[str, Any] | None = None,
    save: bool = True,
    **kwargs: Any,
) -> str:
    """Move a locked run or step by its FSM transition ``name`` (called with ``kwargs``),
    write what changed and record the audit event, with ``payload``: the status and gate it
    had are taken here, before the transition. A step's write is guarded by the status it
    had, a run's by its version (``save_step``, ``save_run``). Without ``save`` the caller
    writes the row later (two transitions, one write: give ``save_step`` the first status).
    Returns the status it had.

    Raises:
        django_fsm.TransitionNotAllowed: ``name`` does not start from its status.
        ConcurrentTransition: the row changed since it was read (inside a pipelined block,
            at the next sync or the commit).
    """
    from_state, from_gate = obj.status, obj.gate
    getattr(obj, name)(**kwargs)
    if save and isinstance(obj, Run):
        save_run(obj)
    elif save:
        save_step(cast(Step, obj), status_was=from_state)
    record_transition(actor, obj, from_state, from_gate=from_gate, **(payload or {}))
    return from_state
