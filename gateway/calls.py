"""The gateway's bookkeeping (synchronous, in the database): an MCP session's run, a tool
call's step, the outcome reported back.

Each MCP session (its ``Mcp-Session-Id``) through ``/mcp/<upstream>/`` is a run of agent kind
``mcp`` in the project of the token that opened it, requested by the token's user: the session
belongs to that user in that project, its owner, and to nobody else (another caller finds no
such session). Its id is kept only in ``McpSession``, never in the run, whose metadata viewers
read. Each ``tools/call`` is a client step of that run, classified by the risk rules first and
else by the tool's MCP annotations (``declared_risk``). The same call repeated in the same
session while its step is still open (a client that lost its connection while a reviewer
decided) is the same step: its ``tool_call_id`` is a digest of the tool and the arguments as
the client sent them, which a reviewer's edits do not change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from agentops.actors import Actor
from agentops.clock import database_now
from agentops.errors import Conflict
from agentops.grants import allows_tool
from gateway.models import McpSession, Upstream
from projects.models import Project
from runs.control.create import run_create, step_append
from runs.control.lifecycle import run_cancel, run_complete
from runs.executor import client
from runs.models import Executor, Risk, Run, Step
from runs.statuses import RunStatus, StepStatus
from runs.tools import Validator, validation_failure
from runs.tools.schemas import schema_invalid

# The name of the validator of a result against its tool's MCP ``outputSchema``.
OUTPUT_SCHEMA = "outputSchema"
# Steps of a call still on its way: a repeat of the call joins them.
OPEN = (
    StepStatus.PENDING,
    StepStatus.WAITING,
    StepStatus.READY,
    StepStatus.QUEUED,
    StepStatus.RUNNING,
    StepStatus.WAITING_RETRY,
)


class NoSuchSession(Exception):
    """The caller does not own the MCP session it named (another user's, or another project's
    token of the same user): to them it does not exist."""


@dataclass(frozen=True)
class _Session:
    run_id: uuid.UUID
    # The owner: the run's requester and project.
    user_id: int
    project_id: int


# The run and owner of each session this process served: neither ever changes (bounded: the
# oldest sessions are forgotten first, and read again if they come back).
_sessions: dict[str, _Session] = {}
_SESSIONS_REMEMBERED = 10_000


def _remember(session_id: str, session: _Session) -> None:
    if len(_sessions) >= _SESSIONS_REMEMBERED:
        del _sessions[next(iter(_sessions))]
    _sessions[session_id] = session


def _known_session(session_id: str) -> _Session | None:
    """The session's run and owner, None before its first call made them."""
    session = _sessions.get(session_id)
    if session is None:
        found = McpSession.objects.filter(session_id=session_id).values_list(
            "run_id", "run__requested_by_id", "run__project_id"
        )
        row = found.first()
        if row is not None:
            session = _Session(*row)
            _remember(session_id, session)
    return session


def _owned(session: _Session, *, actor: Actor, project_id: int) -> uuid.UUID:
    """The session's run when ``actor``'s user in ``project_id`` owns it.

    Raises:
        NoSuchSession: they do not.
    """
    if (session.user_id, session.project_id) != (actor.user.pk, project_id):
        raise NoSuchSession()
    return session.run_id


def declared_risk(tool: dict[str, Any] | None) -> str:
    """The risk an MCP tool's annotations declare: ``low`` when ``readOnlyHint``; otherwise
    ``high`` (a tool that may write, or reach the open world: MCP's defaults for a tool that
    says nothing are ``destructiveHint`` and ``openWorldHint`` true). Source: the MCP
    specification's ``ToolAnnotations``."""
    annotations = (tool or {}).get("annotations") or {}
    return "low" if annotations.get("readOnlyHint") is True else "high"


def call_id(tool: str, args: dict[str, Any]) -> str:
    """The identity of one call as its client sent it: ``mcp:`` and a SHA-256 of the tool
    name and the canonical JSON of the arguments."""
    text = json.dumps([tool, args], sort_keys=True, separators=(",", ":"))
    return "mcp:" + hashlib.sha256(text.encode()).hexdigest()[:40]


def session_run(
    *,
    upstream: Upstream,
    session_id: str,
    actor: Actor,
    project_id: int,
    client_info: Any,
    token_grant: dict[str, Any] | None = None,
) -> uuid.UUID:
    """The run of MCP session ``session_id``, created with its first call (requested by
    ``actor``'s user in the project ``project_id``, the session's owner): goal "MCP session of
    <client> through <upstream>", the upstream and the client's name and version in its
    metadata (not the session id: viewers of the project read metadata); ``token_grant``
    (the caller's token's grant) bounds its calls, with its project's grant.

    Raises:
        NoSuchSession: the session is someone else's (another user, or the same user through
            a token of another project).
    """
    session = _known_session(session_id)
    if session is not None:
        return _owned(session, actor=actor, project_id=project_id)
    info: dict[str, str] = {}
    if client_info is not None:
        info = {
            "name": str(getattr(client_info, "name", "")),
            "version": str(getattr(client_info, "version", "")),
        }
    label = info.get("name") or "an MCP client"
    try:
        with transaction.atomic():
            run = run_create(
                actor=actor,
                agent="mcp",
                goal=f"MCP session of {label} through {upstream.name}",
                metadata={"mcp": {"upstream": upstream.name, "client": info}},
                project=Project.objects.get(pk=project_id),
                token_grant=token_grant,
            )
            McpSession.objects.create(session_id=session_id, upstream=upstream, run=run)
    except IntegrityError:  # another request of the session created it first
        session = _known_session(session_id)
        if session is None:
            raise
        return _owned(session, actor=actor, project_id=project_id)
    _remember(session_id, _Session(run.pk, actor.user.pk, project_id))
    return run.pk


def session_end(*, session_id: str, actor: Actor, project_id: int) -> None:
    """The client ended MCP session ``session_id``: its run is complete (it succeeds once its
    steps are done). Nothing happens for a session that made no call, whose run already
    ended or was completed, or that ``actor``'s user in ``project_id`` does not own."""
    session = _known_session(session_id)
    if session is None:
        return
    with contextlib.suppress(Conflict, NoSuchSession):
        run_complete(run_id=_owned(session, actor=actor, project_id=project_id), actor=actor)


def sessions_end_idle(*, idle_seconds: float, actor: Actor) -> dict[str, int]:
    """End the runs of MCP sessions nobody used for ``idle_seconds`` (the client went away
    without ending its session): a run with nothing open is completed (it succeeds); one with
    a call still open (waiting for a reviewer, or approved after its client left) is cancelled,
    since no client will take its answer. Returns ``{"completed": n, "cancelled": n}``."""
    # The database's clock, not this host's (the runs' ``updated_at`` are still their
    # writers' clocks: a skew shifts the cutoff by as much, never more).
    cutoff = database_now() - timedelta(seconds=idle_seconds)
    idle = Run.objects.filter(
        agent="mcp",
        client_done=False,
        status__in=[RunStatus.RUNNING, RunStatus.WAITING],
        updated_at__lt=cutoff,
    ).values_list("pk", flat=True)
    done = {"completed": 0, "cancelled": 0}
    for run_id in idle:
        open_steps = Step.objects.filter(run_id=run_id, status__in=OPEN).exists()
        try:
            if open_steps:
                run_cancel(run_id=run_id, actor=actor, reason="the MCP session went idle")
                done["cancelled"] += 1
            else:
                run_complete(run_id=run_id, actor=actor)
                done["completed"] += 1
        except (Conflict, TransitionNotAllowed, ConcurrentTransition):
            continue  # it moved meanwhile: the next sweep looks again
    return done


@dataclass(frozen=True)
class CallStep:
    """A call's step as the gateway needs it: ``status``, final ``args`` (a reviewer may have
    edited them), ``idempotency_key``, the ``error`` when refused or failed, ``result`` when
    it succeeded; ``read_only`` when the call changes nothing (``read_only_call``)."""

    id: int
    run_id: uuid.UUID
    status: str
    args: dict[str, Any]
    idempotency_key: str
    error: dict[str, Any] | None
    result: Any
    read_only: bool = False

    @classmethod
    def of(cls, step: Step, *, read_only: bool = False) -> CallStep:
        return cls(
            step.pk,
            step.run_id,
            step.status,
            step.args,
            step.idempotency_key,
            step.error,
            step.result,
            read_only,
        )


def read_only_call(step: Step, declared: str) -> bool:
    """Whether the call of ``step`` changes nothing: its tool declares itself read-only
    (``declared``, its ``declared_risk``, low: MCP's ``readOnlyHint``) and the step's risk,
    rules applied, is low (a rule that raises a read-only tool's risk makes its calls count
    as consequential)."""
    return declared == "low" and step.risk == Risk.LOW


def call_step(
    *, run_id: uuid.UUID, actor: Actor, tool: str, args: dict[str, Any], spec: dict[str, Any] | None
) -> CallStep:
    """The step of this call: the open step of the same call in the run (a repeat), else a
    new client step (arguments checked against the tool's input schema, risk from its
    annotations where no rule matches), moved on as far as it goes.

    Raises:
        InvalidInput: the arguments fail the tool's schema.
        Conflict: the run is finished.
    """
    key = call_id(tool, args)
    declared = declared_risk(spec)
    step = step_append(
        actor=actor,
        run_id=run_id,
        tool=tool,
        args=args,
        executor=Executor.CLIENT,
        args_schema=(spec or {}).get("inputSchema") or None,
        declared_risk=declared,
        tool_call_id=key,
        reuse_open_call=True,
    )
    return CallStep.of(step, read_only=read_only_call(step, declared))


def session_call_step(
    *,
    upstream: Upstream,
    session_id: str,
    actor: Actor,
    project_id: int,
    client_info: Any,
    tool: str,
    args: dict[str, Any],
    spec: dict[str, Any] | None,
    token_grant: dict[str, Any] | None = None,
) -> CallStep:
    """``call_step`` in the run of MCP session ``session_id`` (``session_run``): what one
    ``tools/call`` does in the database before the upstream is called. A call outside the
    grants in force ends ``refused`` here (``not_granted``), never reaching the upstream.

    Raises:
        NoSuchSession: the session is not the caller's.
        InvalidInput: the arguments fail the tool's schema.
        Conflict: the run is finished.
    """
    run_id = session_run(
        upstream=upstream,
        session_id=session_id,
        actor=actor,
        project_id=project_id,
        client_info=client_info,
        token_grant=token_grant,
    )
    return call_step(run_id=run_id, actor=actor, tool=tool, args=args, spec=spec)


def granted_tools(
    *, tools: list[dict[str, Any]], project_id: int, token_grant: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The ``tools`` (MCP tool objects) a caller of the project ``project_id`` with a token
    granted ``token_grant`` may call: those both the token's and the project's grants list
    (``agentops.grants.allows_tool``; argument constraints are checked per call)."""
    project_grant = Project.objects.values_list("grant", flat=True).get(pk=project_id)
    grants = (token_grant, project_grant)
    return [tool for tool in tools if allows_tool(grants, str(tool.get("name", "")))]


def step_state(step_id: int) -> CallStep:
    """The step as it is now."""
    return CallStep.of(Step.objects.get(pk=step_id))


def step_outcome(
    *,
    actor: Actor,
    step: CallStep,
    report: dict[str, Any],
    invalid: dict[str, Any] | None = None,
) -> None:
    """Record what the upstream answered (``{"result": ...}``, with ``"is_error": true`` for
    an ``isError`` result; ``invalid`` when it failed the tool's ``outputSchema``:
    ``output_failure``), that it could not be reached
    (``{"error": ...}``) or that its outcome is unknown (``{"outcome": "unknown"}``) on a ready
    step (``runs.executor.client.step_report``)."""
    client.step_report(
        actor=actor, run_id=step.run_id, step_id=step.id, report=report, invalid=invalid
    )


def _invalid(path: str, message: str) -> dict[str, Any]:
    return {
        "type": "validation_failed",
        "rule": OUTPUT_SCHEMA,
        "path": path,
        "message": f"the result failed {OUTPUT_SCHEMA}: {message}",
    }


def output_failure(spec: dict[str, Any] | None, answer: dict[str, Any]) -> dict[str, Any] | None:
    """How ``answer`` (a ``CallToolResult`` as JSON, not ``isError``) fails the
    ``outputSchema`` its tool declares in ``spec`` (its MCP tool object), as a step's error
    (``{"type": "validation_failed", "rule": "outputSchema", "path", "message"}``,
    ``runs.tools.ValidationFailure.as_error``); None when it conforms or the tool declares
    none. MCP 2025-06-18 (Tools, "Output Schema"): a tool that declares an output schema must
    return ``structuredContent`` that conforms to it. A schema agentops cannot use
    (``runs.tools.schemas.schema_invalid``) fails every answer."""
    schema = (spec or {}).get("outputSchema")
    if schema is None:
        return None
    unusable = schema_invalid(schema)
    if unusable:
        return _invalid("(root)", f"the tool's outputSchema {unusable}")
    if "structuredContent" not in answer:
        return _invalid("(root)", "no structuredContent, though the tool declares an outputSchema")
    validator = Validator(OUTPUT_SCHEMA, schema=schema)
    failure = validation_failure((validator,), answer["structuredContent"])
    return failure.as_error() if failure else None
