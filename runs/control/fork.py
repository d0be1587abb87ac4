"""Forking a run: a new run that starts from the checkpoint before one of its steps."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Model, Q

from agentops.actors import Actor
from agentops.errors import InvalidInput
from agentops.storable import require_storable
from audit.services import audited_atomic
from runs.agents import StepSpec
from runs.context_selectors import active_compactions
from runs.control.create import create_steps
from runs.models import CLIENT_DRIVEN, Checkpoint, Compaction, Message, Run, StateVersion, Step
from runs.selectors import (
    AgentState,
    agent_state_get,
    agent_state_upgraded,
    run_state_schemas,
)
from runs.statuses import StepStatus
from runs.tools import get_tool
from runs.transitions import record_transition
from runs.wakeups import advance_run_on_commit


def fork_state_version(*, run_id: uuid.UUID, from_index: int) -> int:
    """The version of run ``run_id``'s agent state a fork from step ``from_index`` starts with
    by default: the last version before the agent's first write for a step at or after
    ``from_index`` (what the agent knew before it came to that step), or the current version
    when it wrote nothing for those steps."""
    first_later = (
        StateVersion.objects.filter(run_id=run_id, step_index__gte=from_index)
        .order_by("version")
        .values_list("version", flat=True)
        .first()
    )
    if first_later is not None:
        return first_later - 1
    return agent_state_get(run_id=run_id).version


def _fork_state(source: Run, from_index: int, state_version: int | None) -> AgentState:
    """The agent state a fork of ``source`` starts with (``run_fork``).

    Raises:
        InvalidInput: ``state_version`` is not a version of the source's state.
    """
    if state_version is None:
        state_version = fork_state_version(run_id=source.pk, from_index=from_index)
    if isinstance(state_version, bool) or not isinstance(state_version, int):
        raise InvalidInput("state_version must be an integer", field="state_version")
    try:
        return agent_state_get(run_id=source.pk, version=state_version)
    except StateVersion.DoesNotExist:
        current = agent_state_get(run_id=source.pk).version
        raise InvalidInput(
            f"state_version must be a version of the run's state, 0 to {current}",
            field="state_version",
        ) from None


# What a fork keeps of its source run: its project, goal, agent and input, the same agent
# and prompt versions, model and grants (they go on from the fork's step), and its budget.
_KEPT_RUN_FIELDS = (
    "project_id",
    "goal",
    "agent",
    "input",
    "agent_name",
    "agent_version",
    "prompt_id",
    "prompt_name",
    "prompt_version",
    "model",
    "model_parameters",
    "grants",
    "step_limit",
    "max_tokens",
    "max_cost_usd",
    "on_budget_exceeded",
)
# What a fork's copy of a succeeded step keeps of the source's: the call, how it was
# classified and its result; it gets its own run, idempotency key and status (succeeded).
_KEPT_STEP_FIELDS = (
    "index",
    "tool",
    "args",
    "args_hash",
    "executor",
    "args_schema",
    "requested_by_id",
    "risk",
    "gate",
    "gate_params",
    "rationale",
    "tool_call_id",
    "recorded_result",
    "result",
    "tool_error",
    "max_attempts",
    "timeout_seconds",
)


def run_fork(
    *,
    run_id: uuid.UUID,
    actor: Actor,
    from_index: int,
    args: dict[str, Any] | None = None,
    state_version: int | None = None,
) -> Run:
    """Start a new run from the checkpoint before step ``from_index`` of run ``run_id``.

    Steps ``0 .. from_index-1`` must have succeeded: the new run gets them as succeeded steps
    with their recorded results and checkpoints (no tool is called again), and starts with the
    state of the checkpoint before ``from_index``. The source's later steps are copied as
    pending (plan and transcript runs; a client run's client appends its own), the first of
    them with ``args`` instead of its arguments when given: edited arguments get a new
    idempotency key, and the step policy classifies them as edited (the approval policy has
    a reviewer approve them, whatever their risk). The new run links its source
    (``Run.forked_from``, ``Run.forked_from_index``: what the pages show) and its metadata
    names it too (``forked_from``: run id and index), for clients reading metadata.

    The agent's own state (``runs.control.state``) starts as version ``state_version`` of the
    source's (default: ``fork_state_version``, what the agent knew before it came to step
    ``from_index``): the new run's version 0, stored with operation ``fork``. A source with a
    state schema gives the fork the newest version of that schema, and that state upgraded to
    it (``runs.selectors.agent_state_upgraded``): a fork of an old run starts on the current
    schema.

    The new run's conversation is the source's messages appended before step ``from_index``
    existed (``Message.step_index``), copied as they are, and the compactions of them made
    before then: forking from before a compaction gets the original messages back in the
    active context.

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: ``from_index`` out of range or past a step that did not succeed;
            ``args`` not an object, failing the tool's schema or holding what PostgreSQL cannot
            store (``agentops.storable``); ``args`` with nothing to edit; ``state_version``
            not a version of the source's agent state.
        MigrationFailed: that state cannot be upgraded to the newest schema version (a
            ``Conflict``).
    """
    require_storable(args, field="args")
    source = Run.objects.get(pk=run_id)
    steps = list(source.steps.order_by("index"))
    if not isinstance(from_index, int) or not 0 <= from_index <= len(steps):
        raise InvalidInput(f"from_index must be between 0 and {len(steps)}", field="from_index")
    not_done = [s.index for s in steps[:from_index] if s.status != StepStatus.SUCCEEDED]
    if not_done:
        raise InvalidInput(
            f"step {not_done[0]} did not succeed: fork from index {not_done[0]} or earlier",
            field="from_index",
        )
    later = steps[from_index:] if source.agent not in CLIENT_DRIVEN else []
    if args is not None:
        if not later:
            raise InvalidInput("there is no step at from_index whose args could be edited")
        if not isinstance(args, dict):
            raise InvalidInput("args must be an object", field="args")
        tool = get_tool(later[0].tool)
        reason = tool.validate_args(args) if tool else None
        if reason:
            raise InvalidInput(f"args: {reason}", field="args")
    schemas = run_state_schemas(run_id=source.pk)
    agent_state = agent_state_upgraded(_fork_state(source, from_index, state_version), schemas)
    checkpoints = {c.index: c.state for c in source.checkpoints.filter(index__lt=from_index)}
    before_step = Q(step_index__isnull=True) | Q(step_index__lt=from_index)
    messages = list(source.messages.filter(before_step).order_by("position"))
    compactions = list(
        source.compactions.filter(before_step, last__lt=len(messages)).order_by("id")
    )
    with audited_atomic():
        run = Run.objects.create(
            **_values(source, _KEPT_RUN_FIELDS),
            forked_from=source,
            forked_from_index=from_index,
            state_schema=schemas[max(schemas)] if schemas else None,
            metadata={
                **source.metadata,
                "forked_from": {"run": str(source.pk), "index": from_index},
            },
            message_count=len(messages),
            context_tokens=_context_tokens(messages, compactions),
            requested_by=actor.user,
            state=checkpoints.get(from_index - 1, {}),
        )
        _copy_conversation(run, messages, compactions)
        record_transition(
            actor,
            run,
            "",
            agent=run.agent,
            forked_from=str(source.pk),
            from_index=from_index,
            state_version=agent_state.version,
            state_hash=agent_state.state_hash,
        )
        if agent_state.state:
            StateVersion.objects.create(
                run=run,
                version=0,
                state=agent_state.state,
                state_hash=agent_state.state_hash,
                schema_version=agent_state.schema_version,
                operation="fork",
                writer_kind=actor.kind,
                writer_id=actor.id,
                writer_name=actor.name,
                rationale=f"forked from run {source.pk} at state version {agent_state.version}"
                + (
                    f" (schema v{agent_state.upgraded_from} -> v{agent_state.schema_version})"
                    if agent_state.upgraded_from
                    else ""
                ),
            )
        for old in steps[:from_index]:
            step = Step.objects.create(
                run=run,
                idempotency_key=Step.key_for(run.pk, old.index, old.tool, old.args_hash),
                status=StepStatus.SUCCEEDED,
                **_values(old, _KEPT_STEP_FIELDS),
            )
            record_transition(actor, step, "", reused_from_step=old.pk, index=old.index)
            Checkpoint.objects.create(
                run=run, step=step, index=step.index, state=checkpoints.get(old.index, {})
            )
        specs = [
            StepSpec(
                tool=old.tool,
                args=args if position == 0 and args is not None else old.args,
                rationale=old.rationale,
                tool_call_id=old.tool_call_id,
                recorded_result=old.recorded_result,
            )
            for position, old in enumerate(later)
        ]
        create_steps(
            run, specs, first_index=from_index, actor=actor, edited=0 if args is not None else None
        )
        advance_run_on_commit(run.pk)
    return run


def _copy_conversation(run: Run, messages: list[Message], compactions: list[Compaction]) -> None:
    """Copy ``messages`` and ``compactions`` (another run's) to the new ``run``."""
    fields = ("position", "role", "content", "tool_calls", "tool_call_id", "name", "extra")
    copied = [
        Message(run=run, tokens=m.tokens, step_index=m.step_index, **_values(m, fields))
        for m in messages
    ]
    Message.objects.bulk_create(copied)
    kept = ("first", "last", "summary", "summary_tokens", "tokens_before", "tokens_after")
    made = ("summarizer", "summarizer_version", "step_index", "actor")
    Compaction.objects.bulk_create(
        Compaction(run=run, **_values(c, (*kept, *made))) for c in compactions
    )


def _context_tokens(messages: list[Message], compactions: list[Compaction]) -> int:
    """The size (tokens) of the active context made of ``messages`` and ``compactions``."""
    active = active_compactions(compactions)
    replaced = {p for c in active for p in range(c.first, c.last + 1)}
    kept = sum(m.tokens for m in messages if m.position not in replaced)
    return kept + sum(c.summary_tokens for c in active)


def _values(obj: Model, fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in fields}
