"""The agent's own task state: writes that replace it (PUT) or patch it (JSON Merge Patch,
RFC 7396; JSON Patch, RFC 6902), each a new kept version, serialized per run; a session's
state (``session_state_write``) the same way, serialized per session.

The patch semantics are the libraries' (``json-merge-patch``, ``jsonpatch``), not ours. Every
write names the version it was made against; a write against any other version changes
nothing (``PreconditionFailed``), so two agents writing one run never lose an update.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal

import json_merge_patch
import jsonpatch
import jsonpointer

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput, PreconditionFailed, TooLarge
from agentops.storable import require_storable
from audit.services import audited_atomic
from runs.models import (
    STATE_SCHEMA_VERSION,
    StateSchema,
    StateVersion,
    Step,
    state_etag,
    state_hash,
)
from runs.selectors import (
    AgentState,
    agent_state_get,
    agent_state_upgraded,
    run_state_schemas,
    session_state_get,
)
from runs.tools.schemas import schema_problem
from runs.transitions import lock_run, lock_session, record_event, record_session_event

Operation = Literal["put", "merge_patch", "json_patch"]
OPERATIONS: Final = ("put", "merge_patch", "json_patch")
# Limits of one state version: its canonical JSON's size (bytes, UTF-8) and how deep objects
# and arrays nest in it (the state object itself is level 1).
MAX_STATE_BYTES: Final = 256 * 1024
MAX_STATE_DEPTH: Final = 32
# The most operations one JSON Patch may hold, and the longest rationale kept (characters).
MAX_PATCH_OPERATIONS: Final = 1000
MAX_RATIONALE: Final = 2000
# How much of a patch library's message an error repeats (it may quote the state).
_MESSAGE_CHARS = 300


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in ``value`` (a scalar: 0), walked without recursion
    (a hostile document may nest thousands deep)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        if deepest > MAX_STATE_DEPTH:
            break
        pending.extend((child, level + 1) for child in children)
    return deepest


def check_state(state: Any, *, field: str = "state") -> int:
    """Check a state document and return the size of its canonical JSON (bytes, UTF-8; keys
    sorted, no spaces).

    Raises:
        InvalidInput: not a JSON object, nested deeper than ``MAX_STATE_DEPTH`` levels, or
            holding what PostgreSQL cannot store (``agentops.storable``).
        TooLarge: its canonical JSON is over ``MAX_STATE_BYTES`` bytes.
    """
    if not isinstance(state, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    if _depth(state) > MAX_STATE_DEPTH:
        raise InvalidInput(
            f"{field} nests deeper than the limit of {MAX_STATE_DEPTH} levels", field=field
        )
    require_storable(state, field=field)
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode())
    if size > MAX_STATE_BYTES:
        raise TooLarge(
            f"{field} is {size} bytes as JSON, over the limit of {MAX_STATE_BYTES} bytes",
            field=field,
        )
    return size


def _check_json_patch(patch: Any) -> jsonpatch.JsonPatch:
    """The JSON Patch (RFC 6902) ``patch``, its operations and pointers checked for form.

    Raises:
        InvalidInput: not a list of 1 to ``MAX_PATCH_OPERATIONS`` valid operations, or a
            ``path``/``from`` that is no JSON Pointer (RFC 6901).
    """
    if not isinstance(patch, list) or not 1 <= len(patch) <= MAX_PATCH_OPERATIONS:
        raise InvalidInput(
            f"a JSON Patch must be a list of 1 to {MAX_PATCH_OPERATIONS} operations",
            field="patch",
        )
    try:
        parsed = jsonpatch.JsonPatch(patch)
        for i, operation in enumerate(patch):
            for key in ("path", "from"):
                if key in operation:
                    where = f"patch[{i}].{key}"
                    if not isinstance(operation[key], str):
                        raise InvalidInput(f"{where} must be a string", field=where)
                    jsonpointer.JsonPointer(operation[key])
    except (jsonpatch.InvalidJsonPatch, jsonpointer.JsonPointerException) as exc:
        message = f"invalid JSON Patch: {str(exc)[:_MESSAGE_CHARS]}"
        raise InvalidInput(message, field="patch") from exc
    return parsed


def _applied(current: dict[str, Any], operation: Operation, document: Any) -> Any:
    """The state ``operation`` with ``document`` makes of ``current`` (left unchanged).

    Raises:
        InvalidInput: a malformed patch.
        Conflict: a JSON Patch that does not apply to ``current`` (a path that is not there,
            an array index out of range, a failed ``test``): RFC 5789 §2.2's conflicting state.
    """
    if operation == "put":
        return document
    if operation == "merge_patch":
        # ``merge`` changes its first argument in place: give it a copy.
        return json_merge_patch.merge(copy.deepcopy(current), document)
    parsed = _check_json_patch(document)
    try:
        return parsed.apply(current, in_place=False)
    except jsonpatch.InvalidJsonPatch as exc:
        # An operation's members are checked as it is applied (``value`` of an ``add``).
        message = f"invalid JSON Patch: {str(exc)[:_MESSAGE_CHARS]}"
        raise InvalidInput(message, field="patch") from exc
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise Conflict(
            f"the JSON Patch does not apply to the current state: {str(exc)[:_MESSAGE_CHARS]}"
        ) from exc


def run_state_write(
    *,
    run_id: uuid.UUID | str,
    actor: Actor,
    base_version: int,
    operation: Operation,
    document: Any,
    rationale: str = "",
    step_index: int | None = None,
) -> AgentState:
    """Write the run's agent state as a new version, made against version ``base_version``.

    ``operation`` says what ``document`` is: ``put`` the whole new state (a JSON object),
    ``merge_patch`` a JSON Merge Patch (RFC 7396: ``null`` deletes a member, a patch that is
    not an object replaces the state), ``json_patch`` a JSON Patch (RFC 6902, a list of
    operations). ``rationale`` says why (at most ``MAX_RATIONALE`` characters); ``step_index``
    names the run's step the write belongs to (None: none).

    Locks the run row (``lock_run``), so the writes of one run are serialized: the write
    applies only when ``base_version`` is the current version, and stores version
    ``base_version + 1`` (``StateVersion``, unique per run). One audit event,
    ``run.state_written``, in the same transaction: the new and base versions, the hashes of
    the state before and after, the operation, step index and rationale, and for a run with a
    state schema the schema version written and the one the base was upgraded from
    (published to live clients after commit).

    A run that declared a state schema (``Run.state_schema``) writes under the newest version
    of that schema: a current state stored under an older version is upgraded first
    (``runs.selectors.agent_state_upgraded``) and the write applies to the upgraded state; the
    result must match the newest version, and the new version records it as its
    ``schema_version``.

    Raises:
        Run.DoesNotExist: unknown run.
        PreconditionFailed: ``base_version`` is not the current version (nothing changed).
        Conflict: the run is finished (succeeded, failed or cancelled: its state is final), or
            a JSON Patch does not apply to the current state.
        InvalidInput: an unknown operation, a malformed patch, a resulting state that is not
            an object, nests deeper than ``MAX_STATE_DEPTH`` or does not match the run's
            state schema (``"<path>: <rule>"``), a bad rationale or step index.
        MigrationFailed: the current state cannot be upgraded to the newest schema version
            (a ``Conflict``).
        TooLarge: the resulting state is over ``MAX_STATE_BYTES``.
    """
    _check_write(operation, document, rationale)
    if step_index is not None and (
        isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 0
    ):
        raise InvalidInput("step_index must be a step's index (0 or more)", field="step_index")
    with audited_atomic():
        run = lock_run(run_id)
        current = agent_state_get(run_id=run.pk)
        _check_base(run.pk, base_version, current)
        if run.is_terminal:
            raise Conflict(f"run is {run.status}: its state can no longer be written")
        if step_index is not None and not Step.objects.filter(run=run, index=step_index).exists():
            raise InvalidInput(f"the run has no step {step_index}", field="step_index")
        schemas = run_state_schemas(run_id=run.pk)
        new, size = _store(
            current,
            operation,
            document,
            actor,
            rationale,
            schemas=schemas,
            run=run,
            step_index=step_index,
        )
        upgraded_from = (
            current.schema_version if current.schema_version < new.schema_version else None
        )
        record_event(
            actor,
            run,
            "state_written",
            **_written(current, new, operation, size, rationale),
            step_index=step_index,
            **(
                {"schema_version": new.schema_version, "upgraded_from": upgraded_from}
                if schemas
                else {}
            ),
        )
    return AgentState(new.version, new.state, new.schema_version, new.state_hash)


def session_state_write(
    *,
    session_id: uuid.UUID | str,
    actor: Actor,
    base_version: int,
    operation: Operation,
    document: Any,
    rationale: str = "",
) -> AgentState:
    """Write the session's agent state (the user state that outlives its runs: preferences,
    facts) as a new version, made against version ``base_version``: the same operations,
    limits, precondition and errors as ``run_state_write``, under the session's row lock
    (``lock_session``). One audit event, ``session.state_written``, in the session's chain.

    Raises:
        AgentSession.DoesNotExist: unknown session.
        PreconditionFailed: ``base_version`` is not the current version (nothing changed).
        Conflict: the session is closed, or a JSON Patch does not apply to the state.
        InvalidInput, TooLarge: as for ``run_state_write``.
    """
    _check_write(operation, document, rationale)
    with audited_atomic():
        session = lock_session(session_id)
        current = session_state_get(session_id=session.pk)
        _check_base(session.pk, base_version, current)
        if not session.is_open:
            raise Conflict("the session is closed: its state can no longer be written")
        new, size = _store(current, operation, document, actor, rationale, session=session)
        record_session_event(
            actor, session, "state_written", **_written(current, new, operation, size, rationale)
        )
    return AgentState(new.version, new.state, new.schema_version, new.state_hash)


def _check_write(operation: str, document: Any, rationale: Any) -> None:
    """Refuse a malformed write before any lock is taken.

    Raises:
        InvalidInput: an unknown operation, a bad rationale, a document PostgreSQL cannot
            store (NUL, unpaired surrogates, absurd nesting: refused before a patch library
            walks it).
    """
    if operation not in OPERATIONS:
        raise InvalidInput(f"operation must be one of {list(OPERATIONS)}", field="operation")
    if not isinstance(rationale, str):
        raise InvalidInput("rationale must be a string", field="rationale")
    require_storable(rationale, field="rationale", max_length=MAX_RATIONALE)
    require_storable(document, field="document")


def _check_base(owner_id: object, base_version: int, current: AgentState) -> None:
    """Raises ``PreconditionFailed`` unless ``base_version`` is the current version."""
    if base_version != current.version:
        raise PreconditionFailed(
            f"state version {base_version} is not the current version {current.version}: "
            "read the state again and reapply the change",
            version=current.version,
            etag=state_etag(owner_id, current.version),
        )


def _written(
    current: AgentState, new: StateVersion, operation: Operation, size: int, rationale: str
) -> dict[str, Any]:
    """The payload of a ``state_written`` audit event: the new and base versions, the
    operation, the state's hashes before and after, the new state's size (bytes) and the
    rationale."""
    return {
        "version": new.version,
        "base_version": current.version,
        "operation": operation,
        "hash_before": current.state_hash,
        "hash_after": new.state_hash,
        "bytes": size,
        "rationale": rationale,
    }


def _store(
    current: AgentState,
    operation: Operation,
    document: Any,
    actor: Actor,
    rationale: str,
    schemas: dict[int, StateSchema] | None = None,
    **owner: Any,
) -> tuple[StateVersion, int]:
    """Store version ``current.version + 1`` of the state of ``owner`` (``run=`` and
    ``step_index=``, or ``session=``): ``operation`` with ``document`` applied to
    ``current``, upgraded first to the newest of ``schemas`` (the run's state schema's
    versions by number, ``run_state_schemas``; None or empty: none) and checked against it;
    returns it and its size (bytes).

    Raises:
        InvalidInput: the new state does not match the schema; see also ``_applied`` and
            ``check_state``.
        Conflict, TooLarge: see ``_applied`` and ``check_state``.
        MigrationFailed: ``current`` cannot be upgraded.
    """
    schemas = schemas or {}
    base = agent_state_upgraded(current, schemas)
    state = _applied(base.state, operation, document)
    size = check_state(state)
    schema_version = STATE_SCHEMA_VERSION
    if schemas:
        schema_version = max(schemas)
        problem = schema_problem(schemas[schema_version].schema, state)
        if problem:
            name = schemas[schema_version].name
            raise InvalidInput(
                f"the state does not match schema {name} v{schema_version}: {problem}",
                field="state",
            )
    new = StateVersion.objects.create(
        version=current.version + 1,
        state=state,
        state_hash=state_hash(state),
        schema_version=schema_version,
        operation=operation,
        writer_kind=actor.kind,
        writer_id=actor.id,
        writer_name=actor.name,
        rationale=rationale,
        **owner,
    )
    return new, size
