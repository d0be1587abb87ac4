"""Reads of runs and steps shared by the API, the pages and the live streams.

Each selector returns a queryset that loads what its callers show in a fixed number of
queries, whatever the page size (steps with their approval, latest attempts).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import (
    Count,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import Coalesce

from audit.models import AuditEvent
from runs.models import (
    STATE_SCHEMA_VERSION,
    AgentKind,
    AgentSession,
    Message,
    Run,
    StateSchema,
    StateVersion,
    Step,
    StepAttempt,
    state_hash,
)
from runs.state_diff import Change, StepStates, json_diff
from runs.state_migrations import state_upgrade
from runs.statuses import StepStatus, run_status_filter, step_status_info


def run_list(*, status: str | None = None, agent: str | None = None) -> QuerySet[Run]:
    """Runs, newest first, optionally filtered by status as shown (``runs.statuses``, e.g.
    ``awaiting_approval``) and agent; requester joined.

    Raises:
        KeyError: ``status`` is no run status.
    """
    qs = (
        Run.objects.select_related("project", "requested_by", "prompt")
        .defer("prompt__content")
        .order_by("-created_at", "-id")
    )
    if status:
        qs = qs.filter(**run_status_filter(status))
    if agent:
        qs = qs.filter(agent=agent)
    return qs


def steps_with_details() -> QuerySet[Step]:
    """Steps in index order with their approval request, the step a compensation undoes and
    attempts loaded."""
    return (
        Step.objects.select_related("approval", "compensates")
        .prefetch_related(Prefetch("attempt_set", queryset=StepAttempt.objects.order_by("number")))
        .order_by("index")
    )


def run_detail_queryset() -> QuerySet[Run]:
    """Runs with their steps (see ``steps_with_details``) and messages (in position order)
    prefetched, for detail views."""
    return Run.objects.select_related("project", "requested_by", "prompt").prefetch_related(
        Prefetch("steps", queryset=steps_with_details()),
        Prefetch("messages", queryset=Message.objects.order_by("position")),
    )


def last_step_index(run_id: uuid.UUID | str) -> int | None:
    """The index of run ``run_id``'s last step (None: it has none), one read of the steps'
    unique (run, index) index."""
    found = Step.objects.filter(run_id=run_id).order_by("-index").values_list("index")[:1]
    return found[0][0] if found else None


def run_conversation(*, run_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """Every message of run ``run_id`` in position order, in OpenAI chat format, in one
    query."""
    messages = Message.objects.filter(run_id=run_id).order_by("position")
    return [message.as_openai() for message in messages]


def messages_before(*, run_id: uuid.UUID | str, end: int, last: int) -> list[Message]:
    """The last ``last`` messages of run ``run_id`` before position ``end`` (at most), oldest
    first, in one query. A run's positions are 0 to ``message_count - 1`` without gaps, so
    the query names the range of positions, ``end - last`` to ``end - 1``: PostgreSQL reads
    those entries of the (run, position) index and no others, whatever the conversation's
    length and whatever its statistics say (``ORDER BY position DESC LIMIT`` was planned as a
    read of the run's every message and a sort while the table's statistics lagged: 3 ms for
    the last 50 of 10,000, benchmarks/README.md, "conversation")."""
    window = Message.objects.filter(
        run_id=run_id, position__gte=max(0, end - last), position__lt=end
    )
    return list(window.order_by("position"))


def session_list(*, with_run_ids: bool = False) -> QuerySet[AgentSession]:
    """Sessions, newest first, their project joined; ``with_run_ids``: the ids of their runs
    (oldest first) too, one more query for a whole page (the API's shape)."""
    sessions = AgentSession.objects.select_related("project").order_by("-created_at", "-id")
    if not with_run_ids:
        return sessions
    runs = Run.objects.only("id", "session_id").order_by("created_at", "id")
    return sessions.prefetch_related(Prefetch("runs", queryset=runs))


def run_as_created(run: Run, steps: list[Step], messages: list[Message]) -> Run:
    """``run`` loaded as ``run_get`` loads it, from what creating it made in this process: its
    new ``steps`` (pending: no approval request, no attempt yet) and ``messages``, without
    reading anything back. Returns ``run``, whose ``steps`` and ``messages`` then answer from
    memory."""
    for step in steps:
        # What select_related and prefetch_related would have found: nothing yet.
        step._state.fields_cache["approval"] = None
        attempts = _loaded(StepAttempt.objects.none(), [])
        step._prefetched_objects_cache = {"attempt_set": attempts}  # type: ignore[attr-defined]
    run._prefetched_objects_cache = {  # type: ignore[attr-defined]
        "steps": _loaded(run.steps.all(), steps),
        "messages": _loaded(run.messages.all(), messages),
    }
    return run


def _loaded(queryset: QuerySet[Any], found: list[Any]) -> QuerySet[Any]:
    # A queryset whose rows are already known, as Django's prefetch_related leaves it.
    queryset._result_cache = found
    queryset._prefetch_done = True  # type: ignore[attr-defined]
    return queryset


def run_get(*, run_id: uuid.UUID | str) -> Run:
    """One run with its steps, approvals and attempts loaded.

    Raises:
        Run.DoesNotExist: unknown id.
    """
    return run_detail_queryset().get(pk=run_id)


def run_page_steps(
    *, run_id: uuid.UUID | str, defer: tuple[str, ...] = (), ids: Iterable[int] | None = None
) -> list[Step]:
    """The steps of run ``run_id`` (only those of ``ids``, when given) in index order with
    their approval request joined and their number of attempts (``attempts_kept``:
    StepAttempt rows, which a run page lists when its section is opened), without the fields
    ``defer`` names. One query, whatever the run's length."""
    counted = (
        StepAttempt.objects.filter(step_id=OuterRef("pk"))
        .order_by()
        .values("step_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    kept = Coalesce(Subquery(counted, output_field=IntegerField()), 0)
    steps = Step.objects.filter(run_id=run_id)
    if ids is not None:
        steps = steps.filter(pk__in=ids)
    steps = steps.select_related("approval").defer(*defer).annotate(attempts_kept=kept)
    return list(steps.order_by("index"))


def step_attempts(*, step_ids: list[int]) -> dict[int, list[StepAttempt]]:
    """The attempts of each of ``step_ids`` in number order, by step id (a step without any is
    absent). One query, grouped here rather than prefetched: a prefetch builds a related
    manager and a queryset for every step."""
    found: dict[int, list[StepAttempt]] = {}
    if not step_ids:
        return found
    rows = StepAttempt.objects.filter(step_id__in=step_ids).order_by("step_id", "number")
    for attempt in rows:
        found.setdefault(attempt.step_id, []).append(attempt)
    return found


STEP_SUMMARY_FIELDS = ("id", "index", "tool", "risk", "status", "tool_error")


def step_summaries(*, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[dict[str, object]]]:
    """The steps of each of ``run_ids`` as ``{"id", "index", "tool", "risk", "status",
    "tool_error"}`` dicts in index order, in one query (plain values: a page of runs can hold
    thousands of steps)."""
    found: dict[uuid.UUID, list[dict[str, object]]] = {}
    rows = (
        Step.objects.filter(run_id__in=run_ids)
        .order_by("run_id", "index")
        .values_list("run_id", "gate", *STEP_SUMMARY_FIELDS)
    )
    for run_id, gate, *values in rows:
        summary = dict(zip(STEP_SUMMARY_FIELDS, values, strict=True))
        summary["status"] = step_status_info(str(summary["status"]), gate).value
        found.setdefault(run_id, []).append(summary)
    return found


def step_counts(*, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[int, int, int]]:
    """(steps in all, steps succeeded, tool errors) of each of ``run_ids``, in one query: a
    step whose tool answered with an error (``Step.tool_error``) counts as a tool error, not
    as succeeded."""
    succeeded = Q(status=StepStatus.SUCCEEDED)
    # No ordering: the steps' default one (by run, whose own is by creation) would join runs
    # for nothing.
    rows = (
        Step.objects.filter(run_id__in=run_ids)
        .order_by()
        .values("run_id")
        .annotate(
            total=Count("id"),
            done=Count("id", filter=succeeded & Q(tool_error=False)),
            tool_errors=Count("id", filter=succeeded & Q(tool_error=True)),
        )
    )
    return {row["run_id"]: (row["total"], row["done"], row["tool_errors"]) for row in rows}


def conversation_before_call(
    run: Run, step: Step, conversation: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages of ``conversation`` (run ``run``'s, in chat format: ``run_conversation``)
    a reviewer of ``step`` should read: those up to and including the assistant message that
    made the step's tool call, none after it.

    A transcript run's conversation keeps each message's ``position`` in the recording and its
    ``input`` the position of each step's call (``call_positions``; runs created before it was
    kept have the position of each call's recorded result, ``positions``, which follows the
    call). A client run's conversation holds the calls themselves: it is cut after the
    assistant message whose ``tool_calls`` hold the step's ``tool_call_id``. A step that names
    no known place (a plan run, a call the client did not report) gets the whole conversation,
    which then holds nothing recorded after the call.
    """
    if run.agent == AgentKind.TRANSCRIPT:
        calls = run.input.get("call_positions") or []
        if step.index < len(calls) and isinstance(calls[step.index], int):
            last = calls[step.index]
            return [m for m in conversation if m.get("position", last + 1) <= last]
        results = run.input.get("positions") or []
        if step.index < len(results) and isinstance(results[step.index], int):
            end = results[step.index]
            return [m for m in conversation if m.get("position", end) < end]
        return conversation
    if step.tool_call_id:
        for i, message in enumerate(conversation):
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            if message.get("role") == "assistant" and isinstance(calls, list):
                ids = {str(c.get("id", "")) for c in calls if isinstance(c, dict)}
                if step.tool_call_id in ids:
                    return conversation[: i + 1]
    return conversation


@dataclass(frozen=True)
class AgentState:
    """One version of a run's agent state: ``version`` (0: the initial state), the ``state``
    object, its ``schema_version`` and ``state_hash`` (``runs.models.state_hash``), and, when
    it is shown upgraded from the schema version it was stored under, that version
    (``upgraded_from``; None: shown as stored)."""

    version: int
    state: dict[str, Any]
    schema_version: int
    state_hash: str
    upgraded_from: int | None = None


def agent_state_get(*, run_id: uuid.UUID | str, version: int | None = None) -> AgentState:
    """Version ``version`` of the run's agent state as stored (None: the current one, the
    highest).

    Raises:
        StateVersion.DoesNotExist: the run has no such version (a version 0 without a row is
            the empty initial state, ``{}``, under the schema version the run declared; the
            caller has checked that the run exists).
    """

    def declared() -> int | None:
        schema = Run.objects.filter(pk=run_id).values_list("state_schema__version", flat=True)
        return schema.first()

    return _state_get(StateVersion.objects.filter(run_id=run_id), version, "run", declared)


def session_state_get(*, session_id: uuid.UUID, version: int | None = None) -> AgentState:
    """Version ``version`` of the session's agent state (None: the current one), as
    ``agent_state_get`` reads a run's.

    Raises:
        StateVersion.DoesNotExist: the session has no such version.
    """
    return _state_get(StateVersion.objects.filter(session_id=session_id), version, "session")


def _state_get(
    versions: QuerySet[StateVersion],
    version: int | None,
    owner: str,
    declared: Callable[[], int | None] = lambda: None,
) -> AgentState:
    """Version ``version`` of ``versions`` (None: the highest); with no row, version 0 is
    the empty state under the schema version ``declared()`` gives (None: the default)."""
    rows = versions.order_by("-version")
    found = rows.first() if version is None else rows.filter(version=version).first()
    if found is not None:
        return AgentState(found.version, found.state, found.schema_version, found.state_hash)
    if version is None or version == 0:
        return AgentState(0, {}, declared() or STATE_SCHEMA_VERSION, state_hash({}))
    raise StateVersion.DoesNotExist(f"{owner} has no state version {version}")


def state_schema_versions(*, project_id: int, name: str) -> dict[int, StateSchema]:
    """Every version of the project's state schema ``name``, by version number (empty: no such
    schema)."""
    rows = StateSchema.objects.filter(project_id=project_id, name=name)
    return {row.version: row for row in rows}


def run_state_schemas(*, run_id: uuid.UUID | str) -> dict[int, StateSchema]:
    """Every version of the state schema the run declared (``Run.state_schema``), by version
    number; empty when it declared none."""
    declared = Run.objects.filter(pk=run_id).values_list("project_id", "state_schema__name").first()
    if declared is None or declared[1] is None:
        return {}
    return state_schema_versions(project_id=declared[0], name=declared[1])


def agent_state_upgraded(found: AgentState, schemas: dict[int, StateSchema]) -> AgentState:
    """``found`` as a state of the newest of ``schemas`` (a schema's versions by number,
    ``run_state_schemas``): upgraded (``runs.state_migrations.state_upgrade``) with
    ``upgraded_from`` its stored schema version when that is older, else unchanged. Writes
    nothing.

    Raises:
        MigrationFailed: the state cannot be upgraded.
    """
    if not schemas or found.schema_version >= max(schemas):
        return found
    newest = max(schemas)
    state = state_upgrade(
        found.state, schemas=schemas, from_version=found.schema_version, to_version=newest
    )
    return AgentState(found.version, state, newest, state_hash(state), found.schema_version)


def agent_state_read(*, run_id: uuid.UUID | str) -> AgentState:
    """The run's current agent state as a state of the newest version of the run's state
    schema (``agent_state_upgraded``); as stored when the run declared no schema. Writes
    nothing: reading never migrates a stored state (``manage.py migrate_state`` does). A past
    version is history: ``agent_state_get`` shows it as it was written.

    Raises:
        MigrationFailed: the state cannot be upgraded.
    """
    found = agent_state_get(run_id=run_id)
    return agent_state_upgraded(found, run_state_schemas(run_id=run_id))


def state_version_list(
    *,
    run_id: uuid.UUID | str | None = None,
    session_id: uuid.UUID | None = None,
    before: int | None = None,
    limit: int,
) -> tuple[list[StateVersion], int]:
    """Up to ``limit`` of the run's (or, with ``session_id``, the session's) stored state
    versions below version ``before`` (None: from the newest), newest first, their ``state``
    not loaded (it may be large), and how many versions there are below ``before`` in all
    (counted with the same query)."""
    owner = {"run_id": run_id} if session_id is None else {"session_id": session_id}
    rows = StateVersion.objects.filter(**owner).defer("state").order_by("-version")
    if before is not None:
        rows = rows.filter(version__lt=before)
    found = list(rows.annotate(versions=Window(Count("id")))[:limit])
    total = int(found[0].versions) if found else 0
    shown: list[StateVersion] = [row for row in found]
    return shown, total


def state_written_steps(*, run_id: uuid.UUID | str) -> set[int]:
    """The indexes of the run's steps that a write of its agent state names."""
    named = StateVersion.objects.filter(run_id=run_id, step_index__isnull=False)
    indexes = named.order_by().values_list("step_index", flat=True).distinct()
    return {index for index in indexes if index is not None}


def agent_state_written_for_step(*, run_id: uuid.UUID | str, index: int) -> StepStates | None:
    """What the agent wrote into its state for step ``index`` of the run: from the state
    before its first write naming the step to the state after its last (writes for other
    steps in between included), with the changes (``runs.state_diff.json_diff``); None when
    no write names the step."""
    written = StateVersion.objects.filter(run_id=run_id, step_index=index).aggregate(
        first=Min("version"), last=Max("version")
    )
    if written["first"] is None:
        return None
    before = agent_state_get(run_id=run_id, version=written["first"] - 1).state
    after = agent_state_get(run_id=run_id, version=written["last"]).state
    return StepStates(before, after, json_diff(before, after))


@dataclass(frozen=True)
class ArgsEdit:
    """A person's edit of a step's arguments while it waited at its gate, from its audit event
    (``step.args_edited``): who (``editor``, their display name as recorded), when (``at``),
    why (``reason``, may be empty), and what changed (``changes``: ``runs.state_diff.Change``
    items from the old arguments to the new, in document order)."""

    editor: str
    at: datetime
    reason: str
    changes: list[Change]


def args_edits(*, run_ids: list[uuid.UUID], step_ids: list[int]) -> dict[int, list[ArgsEdit]]:
    """The argument edits of each of ``step_ids`` (steps of the runs ``run_ids``), oldest
    first, by step id (a step never edited is absent). One query, on the audit log's
    run index."""
    if not step_ids:
        return {}
    wanted = {str(step_id) for step_id in step_ids}
    events = (
        AuditEvent.objects.filter(run_id__in=run_ids, verb="step.args_edited", object_type="step")
        .order_by("id")
        .values_list("object_id", "actor_name", "created_at", "payload")
    )
    found: dict[int, list[ArgsEdit]] = {}
    for object_id, editor, at, payload in events:
        if object_id not in wanted or not isinstance(payload, dict):
            continue
        before = (payload.get("from") or {}).get("args")
        after = (payload.get("to") or {}).get("args")
        found.setdefault(int(object_id), []).append(
            ArgsEdit(editor, at, str(payload.get("reason") or ""), json_diff(before, after))
        )
    return found
