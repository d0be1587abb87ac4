"""Where a memory write came from: the run, step, session and source message it names,
checked to belong to the item's project.

The provenance models are the runs app's, reached through ``MemoryItem``'s foreign keys
(``related_model``), not imported: the memory app sits below ``runs`` (which calls it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from agentops.errors import InvalidInput
from memory.models import MemoryItem


@dataclass(frozen=True)
class Provenance:
    """The run (UUID), step (id), session (UUID) and source message (id) a write came from,
    each None when not given; ``step_index`` is the step's index in its run; ``subject``
    the session's subject (blank: none or no session)."""

    run_id: uuid.UUID | None = None
    step_id: int | None = None
    step_index: int | None = None
    session_id: uuid.UUID | None = None
    source_message_id: int | None = None
    subject: str = ""


NONE = Provenance()


def _model(field: str) -> Any:
    return MemoryItem._meta.get_field(field).related_model


def _uuid(raw: Any, field: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        raise InvalidInput(f"{field} must be a UUID", field=field) from None


def provenance_of(
    *,
    project_id: int,
    run_id: Any = None,
    step_index: Any = None,
    session_id: Any = None,
    source_message_id: Any = None,
) -> Provenance:
    """Check and resolve the provenance a client names: ``run_id`` (a run of the project),
    ``step_index`` (a step of that run, by index), ``session_id`` (a session of the project;
    default: the run's) and ``source_message_id`` (a message of that run or session).

    Raises:
        InvalidInput: a malformed id, one of another project (told apart from a missing one
            by no one: both are "no such ..."), a step without a run, a message of neither.
    """
    run = None
    if run_id is not None:
        run = (
            _model("run")
            .objects.filter(pk=_uuid(run_id, "run"), project_id=project_id)
            .values("pk", "session_id")
            .first()
        )
        if run is None:
            raise InvalidInput("no such run in this project", field="run")
    step_id = None
    if step_index is not None:
        if run is None:
            raise InvalidInput("a step needs its run", field="step_index")
        if isinstance(step_index, bool) or not isinstance(step_index, int):
            raise InvalidInput("step_index must be a whole number", field="step_index")
        step_id = (
            _model("step")
            .objects.filter(run_id=run["pk"], index=step_index)
            .values_list("pk", flat=True)
            .first()
        )
        if step_id is None:
            raise InvalidInput("no such step in this run", field="step_index")
    session = None
    wanted = session_id if session_id is not None else (run or {}).get("session_id")
    if wanted is not None:
        session = (
            _model("session")
            .objects.filter(pk=_uuid(wanted, "session"), project_id=project_id)
            .values("pk", "subject")
            .first()
        )
        if session is None:
            raise InvalidInput("no such session in this project", field="session")
    message_id = None
    if source_message_id is not None:
        if isinstance(source_message_id, bool) or not isinstance(source_message_id, int):
            raise InvalidInput("source_message must be a message id", field="source_message")
        owners = [("run_id", run and run["pk"]), ("session_id", session and session["pk"])]
        messages = _model("source_message").objects.filter(pk=source_message_id)
        found = any(owner and messages.filter(**{name: owner}).exists() for name, owner in owners)
        if not found:
            raise InvalidInput("no such message in this run or session", field="source_message")
        message_id = source_message_id
    return Provenance(
        run_id=run["pk"] if run else None,
        step_id=step_id,
        step_index=step_index if step_id is not None else None,
        session_id=session["pk"] if session else None,
        source_message_id=message_id,
        subject=session["subject"] if session else "",
    )
