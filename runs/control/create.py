"""Creating runs and appending steps: inputs checked, steps classified by the step policy
(``runs.gates``), rows inserted, the run woken after commit."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from django.conf import settings

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.services import audited_atomic
from projects.models import Project, default_project_id
from runs.agents import StepSpec, agent_for
from runs.agents.base import parse_step_list
from runs.budget import parse_budget
from runs.control.conversation import add_usage_locked, message_rows, parse_usage
from runs.control.identity import identity_apply, parse_identity
from runs.control.lifecycle import check_client_run
from runs.control.sessions import session_messages_locked
from runs.executor.advance import advance_locked
from runs.executor.limits import budget_stops_run_locked, step_limit_locked
from runs.gates import Classification, StepRequest, step_policy
from runs.models import (
    AgentSession,
    Executor,
    OnFailure,
    Risk,
    Run,
    StateSchema,
    Step,
)
from runs.policy import PolicyContext, fixed_grants, run_policy, run_policy_of
from runs.selectors import run_as_created
from runs.store.step import lock_for_append
from runs.store.transaction import pipelined_atomic
from runs.store.writes import insert_new, step_change_later
from runs.tools import get_tool, schema_invalid, schema_problem
from runs.trace_context import parse_traceparent
from runs.transitions import (
    lock_session,
    record_session_event,
    record_transition,
    save_run,
    save_session,
)
from runs.wakeups import advance_run_on_commit


def validate_spec(spec: StepSpec, *, where: str, registered_only: bool) -> None:
    """Check a step spec's tool and arguments; ``where`` names it in the error. A client step
    may name any tool; its arguments are checked against the schema its client gave.

    Raises:
        InvalidInput: the tool is unknown (when ``registered_only``), or the arguments fail
            the tool's JSON schema; a client step's ``args_schema`` is no JSON Schema.
    """
    if spec.executor == Executor.CLIENT:
        invalid = schema_invalid(spec.args_schema)
        if invalid:
            raise InvalidInput(f"{where}.args_schema: {invalid}", field=f"{where}.args_schema")
        problem = schema_problem(spec.args_schema, spec.args)
        if problem:
            raise InvalidInput(f"{where}.args: {problem}", field=f"{where}.args")
        return
    tool = get_tool(spec.tool)
    if tool is None:
        if registered_only:
            raise InvalidInput(f"{where}.tool: unknown tool {spec.tool!r}", field=f"{where}.tool")
        return
    reason = tool.validate_args(spec.args)
    if reason:
        raise InvalidInput(f"{where}.args: {reason}", field=f"{where}.args")


def new_step(
    run: Run,
    spec: StepSpec,
    *,
    index: int,
    klass: Classification,
    requested_by: Any = None,
    trace_parent: str = "",
) -> Step:
    """An unsaved pending step of ``run`` at ``index``, classified as ``klass``, asked for by
    the user ``requested_by`` in a request whose checked ``traceparent`` is ``trace_parent``."""
    tool = get_tool(spec.tool)
    digest = Step.args_digest(spec.args)
    return Step(
        run=run,
        index=index,
        tool=spec.tool,
        args=spec.args,
        args_hash=digest,
        executor=spec.executor,
        args_schema=spec.args_schema,
        declared_risk=spec.declared_risk,
        idempotency_key=Step.key_for(run.pk, index, spec.tool, digest),
        risk=klass.risk,
        requested_by=requested_by,
        gate=klass.gate,
        gate_params=klass.params,
        refusal=klass.refusal,
        policy_version=klass.policy_version,
        rationale=spec.rationale,
        tool_call_id=spec.tool_call_id,
        trace_parent=trace_parent,
        recorded_result=spec.recorded_result,
        max_attempts=tool.max_attempts if tool else settings.AGENTOPS_DEFAULT_MAX_ATTEMPTS,
        timeout_seconds=(
            tool.timeout_seconds if tool else settings.AGENTOPS_DEFAULT_STEP_TIMEOUT_SECONDS
        ),
    )


def insert_steps(steps: list[Step], actor: Actor) -> list[Step]:
    """Insert new steps in one statement and record their creation (steps whose keys are
    reserved are not read back: inside a batch the INSERT is held)."""
    insert_new(steps, read_keys=bool(steps) and steps[0].pk is None)
    for step in steps:
        record_transition(actor, step, "", tool=step.tool, risk=step.risk, index=step.index)
    return steps


def classify_specs(
    specs: list[StepSpec], *, policy: PolicyContext, edited: int | None = None
) -> list[Classification]:
    """The step policy's classification of ``specs`` (risk, gate; the one at position
    ``edited`` has arguments a person edited) under ``policy`` (``runs.policy``): reads the
    risk rules. A call outside the grants in force is refused before any gate, whatever the
    rules say; each classification records the policy version."""
    requests = [
        StepRequest(
            spec.tool,
            spec.args,
            edited=i == edited,
            declared_risk=spec.declared_risk,
            project_id=policy.project_id,
        )
        for i, spec in enumerate(specs)
    ]
    found = []
    for spec, klass in zip(specs, step_policy().classify(requests), strict=True):
        refused = policy.refusal(spec.tool, spec.args) or klass.refusal
        if refused is not None:
            klass = Classification(Risk.DENY, refusal=refused)
        found.append(replace(klass, policy_version=policy.version))
    return found


def create_steps(
    run: Run,
    specs: list[StepSpec],
    *,
    first_index: int,
    actor: Actor,
    edited: int | None = None,
    keys: list[int] | None = None,
    classes: list[Classification] | None = None,
    trace_parent: str = "",
) -> list[Step]:
    """Classify ``specs`` (the one at position ``edited`` has arguments a person edited;
    ``classes``: already classified by ``classify_specs``), then insert them as pending steps
    of ``run`` from ``first_index`` on, with the primary ``keys`` reserved for them if given
    (one per spec), appended in a request whose checked ``traceparent`` is
    ``trace_parent``."""
    if classes is None:
        classes = classify_specs(specs, policy=run_policy(run), edited=edited)
    steps = [
        new_step(
            run,
            spec,
            index=first_index + i,
            klass=klass,
            requested_by=actor.user,
            trace_parent=trace_parent,
        )
        for i, (spec, klass) in enumerate(zip(specs, classes, strict=True))
    ]
    for step, key in zip(steps, keys or [], strict=False):
        step.pk = key
    return insert_steps(steps, actor)


def _declared_schema(project_id: int, declared: Any) -> StateSchema | None:
    """The state schema version ``{"name", "version"?}`` names in the project (default
    version: the newest); None for None.

    Raises:
        InvalidInput: not such an object, or naming no schema version of the project.
    """
    if declared is None:
        return None
    version = declared.get("version") if isinstance(declared, dict) else None
    if (
        not isinstance(declared, dict)
        or set(declared) - {"name", "version"}
        or not isinstance(declared.get("name"), str)
        or not (version is None or (isinstance(version, int) and not isinstance(version, bool)))
    ):
        raise InvalidInput(
            'state_schema must be {"name": ..., "version": ...} (version optional)',
            field="state_schema",
        )
    found = StateSchema.objects.filter(project_id=project_id, name=declared["name"])
    schema = (
        found.order_by("-version").first()
        if version is None
        else found.filter(version=version).first()
    )
    if schema is None:
        raise InvalidInput(
            f"the project has no state schema {declared['name']!r}"
            + ("" if version is None else f" version {version}"),
            field="state_schema",
        )
    return schema


def run_create(
    *,
    actor: Actor,
    agent: str,
    goal: str,
    steps: Any = None,
    transcript: Any = None,
    metadata: Any = None,
    step_limit: int | None = None,
    deadline: Any = None,
    budget: Any = None,
    project: Project | None = None,
    state_schema: Any = None,
    session: AgentSession | None = None,
    identity: dict[str, Any] | None = None,
    traceparent: str | None = None,
    grant: Any = None,
    token_grant: dict[str, Any] | None = None,
    on_failure: str = OnFailure.STOP,
) -> Run:
    """Create a queued run in ``project`` (default: the ``default`` project; the caller has
    checked that the actor may add runs there) with its initial steps and start it after
    commit.

    ``agent`` is plan, client or transcript; ``steps`` a list of ``{"tool", "args",
    "rationale"?}`` (plan, client); ``transcript`` an OpenAI chat message list (transcript);
    ``metadata`` a JSON object kept as is; ``step_limit`` caps the steps (default
    ``AGENTOPS_DEFAULT_STEP_LIMIT``); ``deadline`` an aware datetime; ``budget`` the run's
    budget (``runs.budget.parse_budget``: ``max_tokens``, ``max_cost_usd``, ``max_steps``,
    ``deadline``, ``on_exceed``), whose ``max_steps`` and ``deadline`` stand for
    ``step_limit`` and ``deadline``. ``state_schema`` (``{"name", "version"?}``) declares the
    project's state schema its agent state follows (``Run.state_schema``; default version:
    the newest). ``session`` (an open session of the same project) is the session the run
    belongs to: its messages join the session's conversation. ``identity`` holds what drives
    the run as its client reports it (``runs.control.identity.parse_identity``: agent name
    and version, system prompt with its name and version label, model and parameters).
    ``traceparent`` is the creating request's W3C ``traceparent`` header: kept when valid
    (``runs.trace_context.parse_traceparent``), so the run's trace continues the client's.
    ``grant`` (``agentops.grants.parse_grant``; None: no limit) bounds the tools the run may
    call, and so does ``token_grant``, the grant of the API token creating it (already
    parsed): both are fixed on the run (``Run.grants``), and a call outside them, its
    session's or its project's grant ends ``refused`` before any gate.
    ``on_failure`` (``OnFailure``: stop or compensate) says whether its failure starts its
    compensation (``runs.control.compensation``).

    Returns the run as it was created (queued), its steps in ``run.steps.all()`` without a
    query (``runs.selectors.run_as_created``); the workers may have moved it on since.

    Raises:
        InvalidInput: any part is malformed: unknown agent or tool, arguments that fail the
            tool's schema, a transcript that does not parse, more steps than the limit, a
            malformed budget or one that repeats ``step_limit`` or ``deadline``, a state
            schema the project does not have, a malformed identity or grant, an unknown
            ``on_failure``.
    """
    if on_failure not in OnFailure.values:
        raise InvalidInput(f"on_failure must be one of {OnFailure.values}", field="on_failure")
    reported = parse_identity(identity or {})
    grants = fixed_grants(grant=grant, token_grant=token_grant)
    if not isinstance(goal, str) or not goal.strip():
        raise InvalidInput("goal must be a non-empty string", field="goal")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object", field="metadata")
    handler = agent_for(agent)
    prepared = handler.prepare({"steps": steps, "transcript": transcript})
    for i, spec in enumerate(prepared.steps):
        validate_spec(spec, where=f"steps[{i}]", registered_only=handler.needs_registered_tools)
    limits = parse_budget(budget) if budget is not None else {}
    if ("step_limit" in limits and step_limit) or ("deadline" in limits and deadline):
        raise InvalidInput(
            "give max_steps and deadline either in budget or as step_limit and deadline",
            field="budget",
        )
    limit = limits.pop("step_limit", None) or step_limit or settings.AGENTOPS_DEFAULT_STEP_LIMIT
    deadline = limits.pop("deadline", None) or deadline
    if len(prepared.steps) > limit:
        raise InvalidInput(
            f"{len(prepared.steps)} steps exceed the step limit of {limit}", field="steps"
        )
    project_id = project.pk if project else default_project_id()
    declared = _declared_schema(project_id, state_schema)
    with audited_atomic():
        run = Run(
            project_id=project_id,
            state_schema=declared,
            goal=goal,
            agent=agent,
            input=prepared.input,
            metadata=metadata,
            grants=grants,
            requested_by=actor.user,
            step_limit=limit,
            deadline=deadline,
            trace_parent=parse_traceparent(traceparent),
            on_failure=on_failure,
            **limits,
        )
        identity_changes = identity_apply(run, reported)
        messages = message_rows(run, prepared.conversation, step_index=None)
        if session is not None:
            # The session is locked (it may be closing at this moment) and must be open.
            locked = lock_session(session.pk)
            if not locked.is_open or locked.project_id != run.project_id:
                raise InvalidInput("the session is closed or of another project", field="session")
            run.session = locked
            session_messages_locked(locked, messages, run=run)
            save_session(locked)
        run.message_count = len(messages)
        run.context_tokens = sum(message.tokens for message in messages)
        run.save(force_insert=True)
        insert_new(messages)
        declared_payload: dict[str, Any] = {}
        if declared is not None:
            declared_payload["state_schema"] = {"name": declared.name, "version": declared.version}
        if run.session is not None:
            declared_payload["session"] = str(run.session.pk)
        if identity_changes:
            declared_payload["identity"] = identity_changes
        record_transition(actor, run, "", agent=agent, goal=goal, **declared_payload)
        if run.session is not None:
            record_session_event(actor, run.session, "run_added", run=str(run.pk))
        steps = create_steps(run, prepared.steps, first_index=0, actor=actor)
        advance_run_on_commit(run.pk)
    if project is not None:
        run.project = project
    return run_as_created(run, steps, messages)


def step_append(
    *,
    actor: Actor,
    run_id: uuid.UUID,
    tool: str,
    args: Any,
    rationale: str = "",
    usage: Any = None,
    executor: str = Executor.SERVER,
    args_schema: Any = None,
    declared_risk: str = "",
    tool_call_id: str = "",
    reuse_open_call: bool = False,
    traceparent: str | None = None,
) -> Step:
    """Append one step to a client run; it runs when the steps before it are done. The run is
    advanced in the same transaction: when nothing is in flight, the new step is already
    ``ready`` (client step), queued, or waiting at its gate when this returns.

    ``executor`` ``server``: a registered tool the workers run; ``client``: the client runs
    the tool itself (any name; ``args_schema``, a JSON Schema object, checks the arguments)
    and reports its outcome when the step is ``ready`` (``runs.executor.client``). ``usage``
    (``runs.control.conversation.parse_usage``; ``model`` optional) is what the client's
    model spent choosing this call: kept on the step and added to the run's totals.
    ``declared_risk`` (a ``Risk`` value) is what the tool's own server declares: it classifies
    the step when no risk rule matches (the MCP gateway passes its upstream's annotations).
    ``tool_call_id`` is the client's own id for the call (kept on the step, never changed);
    with ``reuse_open_call``, an open step of the run with the same ``tool_call_id`` (a client
    repeating a call it stopped waiting for) is returned as it is instead. ``traceparent`` is
    the request's W3C ``traceparent`` header: kept on the step when valid, so its span hangs
    below the client's (``runs.trace_context.parse_traceparent``).

    One step past the run's step limit may be appended: when its turn comes the run fails
    (budget policy fail; the step is skipped) or it waits for approval to continue (policy
    approve).

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: unknown server tool or arguments that fail its schema; an
            ``args_schema`` that is no JSON Schema or given for a server step; malformed
            usage; not a client run.
        Conflict: the run is finished, its client already completed it, or a step past its
            step limit is already appended.
    """
    if executor not in Executor.values:
        raise InvalidInput(f"executor must be one of {Executor.values}", field="executor")
    if args_schema is not None and executor != Executor.CLIENT:
        raise InvalidInput("args_schema is for client steps only", field="args_schema")
    specs = parse_step_list(
        [{"tool": tool, "args": args, "rationale": rationale}], field_name="step"
    )
    specs[0].executor, specs[0].args_schema = executor, args_schema or {}
    specs[0].declared_risk = declared_risk
    specs[0].tool_call_id = tool_call_id
    validate_spec(specs[0], where="step", registered_only=True)
    reported = parse_usage(usage, model_required=False) if usage is not None else None
    # Classified before the transaction: reading the rules would end its pipeline.
    classes = classify_specs(specs, policy=run_policy_of(run_id))
    with pipelined_atomic():
        run, count, first_open, keys, repeat = lock_for_append(
            run_id, tool_call_id if reuse_open_call else "", _APPEND_EVENTS
        )
        if repeat:
            return repeat[0]
        check_client_run(run, "have steps appended")
        refusal = step_limit_locked(run, count)
        if refusal:
            raise Conflict(refusal)
        (step,) = create_steps(
            run,
            specs,
            first_index=count,
            actor=actor,
            keys=keys,
            classes=classes,
            trace_parent=parse_traceparent(traceparent),
        )
        if reported is not None:
            step.usage = reported.as_json()
            step_change_later(step.pk, {"usage": step.usage})
            add_usage_locked(run, reported)
        save_run(run)
        if not budget_stops_run_locked(run, actor):
            # Moved on here, not by a worker later: a client step the client may run at
            # once is ``ready`` in this very response, so the client need not wait for it.
            advance_locked(run, actor, first_open=first_open or [step])
    return step


# Audit events of appending a step the client may run at once: created, then ready.
_APPEND_EVENTS = 2
