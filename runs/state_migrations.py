"""How an agent state written under one version of its schema (``StateSchema``) becomes one of
the next version, and of any later one (``state_upgrade``).

A version's migration is either a Python function registered at start-up with
``@state_migration(name, version)`` (in a module named by the setting
``AGENTOPS_STATE_MIGRATION_MODULES``, or imported by an app's ``ready()``), which a schema
names by its dotted path (never an arbitrary import path: only registered functions can be
named), or a list of declarative steps (``check_steps``), each on JSON Pointers (RFC 6901):

- ``{"op": "rename", "from": "/a", "to": "/b"}``: the member ``from`` gets the name ``to`` in
  the same object (a member that is absent: nothing happens);
- ``{"op": "move", "from": "/a", "to": "/b/c"}``: the value at ``from`` moves to ``to``
  (RFC 6902 ``move``; absent: nothing happens);
- ``{"op": "default", "path": "/x", "value": ...}``: ``value`` is added where nothing is;
- ``{"op": "remove", "path": "/x"}``: the value is removed if present.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import jsonpatch
import jsonpointer

from agentops.errors import Conflict
from agentops.storable import unstorable
from runs.tools.schemas import schema_problem

MigrationFunction = Callable[[dict[str, Any]], dict[str, Any]]
F = TypeVar("F", bound=MigrationFunction)
# The dotted path of each registered migration → (schema name, version it migrates to, it).
_REGISTRY: dict[str, tuple[str, int, MigrationFunction]] = {}
# The most steps one declarative migration may hold.
MAX_STEPS: Final = 100
_STEP_KEYS: Final = {
    "rename": ("from", "to"),
    "move": ("from", "to"),
    "default": ("path", "value"),
    "remove": ("path",),
}
_MESSAGE_CHARS = 300
_ABSENT = object()


class MigrationFailed(Conflict):
    """A state could not be upgraded: a migration failed on it, or the result does not match
    the newer schema (the message says which and where). The API answers 409: the stored
    state conflicts with the schema."""


class SchemaVersion(Protocol):
    """What ``state_upgrade`` reads of a ``StateSchema`` row."""

    name: str
    version: int
    schema: Any
    migration_function: str
    migration_steps: Any


def state_migration(name: str, version: int) -> Callable[[F], F]:
    """Register the decorated function as the migration of schema ``name``'s states from
    version ``version - 1`` to ``version`` (2 or more). It gets a copy of the state (a JSON
    object, which it may change) and returns the new state; it must not touch the database.
    A ``StateSchema`` names it by its dotted path, ``module.qualname``.

    Raises:
        ValueError: ``version`` below 2, or another function registered under the same path.
    """
    if version < 2:
        raise ValueError("a migration leads to version 2 or later")

    def register(function: F) -> F:
        path = f"{function.__module__}.{function.__qualname__}"
        known = _REGISTRY.get(path)
        if known is not None and known[2] is not function:
            raise ValueError(f"a state migration is already registered as {path}")
        _REGISTRY[path] = (name, version, function)
        return function

    return register


def registered_migrations(name: str | None = None, version: int | None = None) -> list[str]:
    """The dotted paths of the registered migrations (of schema ``name`` to ``version`` when
    given), sorted."""
    return sorted(
        path
        for path, (for_name, for_version, _) in _REGISTRY.items()
        if (name is None or for_name == name) and (version is None or for_version == version)
    )


def _pointer_problem(value: Any, where: str) -> str | None:
    if not isinstance(value, str) or not value:
        return f"{where} must be a JSON Pointer to a member, e.g. /a/b"
    try:
        jsonpointer.JsonPointer(value)
    except jsonpointer.JsonPointerException as exc:
        return f"{where} is not a JSON Pointer: {exc}"
    return None


def check_steps(steps: Any) -> str | None:
    """Why ``steps`` is not a list of declarative migration steps (see the module text), or
    None when it is: at most ``MAX_STEPS``, each with exactly the members of its ``op``,
    pointers that name a member (not the whole state), ``rename`` within one object, no
    ``move`` into what it moves, a ``value`` PostgreSQL can store."""
    if not isinstance(steps, list) or len(steps) > MAX_STEPS:
        return f"must be a list of at most {MAX_STEPS} steps"
    for i, step in enumerate(steps):
        where = f"[{i}]"
        if not isinstance(step, dict) or step.get("op") not in _STEP_KEYS:
            return f"{where}: op must be one of {sorted(_STEP_KEYS)}"
        keys = _STEP_KEYS[step["op"]]
        if set(step) != {"op", *keys}:
            return f"{where}: a {step['op']} step has exactly op, {', '.join(keys)}"
        for key in ("from", "to", "path"):
            if key in step and (problem := _pointer_problem(step[key], f"{where}.{key}")):
                return problem
        if (
            step["op"] == "rename"
            and step["from"].rsplit("/", 1)[0] != step["to"].rsplit("/", 1)[0]
        ):
            return f"{where}: rename keeps the member in its object (use move)"
        if step["op"] == "move" and (step["to"] + "/").startswith(step["from"] + "/"):
            return f"{where}: cannot move a value into itself"
        if "value" in step and (problem := unstorable(step["value"], f"{where}.value")):
            return problem
    return None


def _apply_steps(state: dict[str, Any], steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``state`` after ``steps`` (checked by ``check_steps``), changed in place.

    Raises:
        MigrationFailed: a step's target has no parent object or array to go in.
    """
    for i, step in enumerate(steps):
        op = step["op"]
        source = step.get("from", step.get("path"))
        present = jsonpointer.resolve_pointer(state, source, _ABSENT) is not _ABSENT
        if op == "default" and present:
            continue
        if op != "default" and not present:
            continue
        operation: dict[str, Any] = {
            "rename": {"op": "move", "from": source, "path": step.get("to")},
            "move": {"op": "move", "from": source, "path": step.get("to")},
            "default": {"op": "add", "path": source, "value": copy.deepcopy(step.get("value"))},
            "remove": {"op": "remove", "path": source},
        }[op]
        try:
            state = jsonpatch.apply_patch(state, [operation], in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise MigrationFailed(f"step [{i}] ({op}): {str(exc)[:_MESSAGE_CHARS]}") from exc
    return state


def _migrated(state: dict[str, Any], schema: SchemaVersion) -> dict[str, Any]:
    """``state`` (a copy the caller gives away) migrated to ``schema``'s version.

    Raises:
        MigrationFailed: see ``state_upgrade``.
    """
    label = f"{schema.name} v{schema.version}"
    if not schema.migration_function:
        return _apply_steps(state, schema.migration_steps or [])
    registered = _REGISTRY.get(schema.migration_function)
    if registered is None:
        raise MigrationFailed(
            f"the migration to {label}, {schema.migration_function}, is not registered in "
            "this process (AGENTOPS_STATE_MIGRATION_MODULES)"
        )
    try:
        result = registered[2](state)
    # Project code: whatever it raises on a stored state is that state's failure to migrate,
    # reported with the run, never a crash of the read or of the batch.
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"[:_MESSAGE_CHARS]
        raise MigrationFailed(f"the migration to {label} failed: {message}") from exc
    if not isinstance(result, dict):
        raise MigrationFailed(f"the migration to {label} returned no JSON object")
    # What it returned goes to the API and the database as JSON: a set, a date or a NaN is the
    # migration's failure here, not an error when the answer is rendered.
    try:
        copied: dict[str, Any] = json.loads(json.dumps(result, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        message = str(exc)[:_MESSAGE_CHARS]
        raise MigrationFailed(
            f"the migration to {label} returned what is not JSON: {message}"
        ) from exc
    return copied


def state_upgrade(
    state: dict[str, Any],
    *,
    schemas: Mapping[int, SchemaVersion],
    from_version: int,
    to_version: int,
) -> dict[str, Any]:
    """``state``, written under version ``from_version`` of a schema, as a state of version
    ``to_version`` (higher): each version's migration applied in turn (``from_version + 1``,
    ..., ``to_version``) to a copy, and the result checked against version ``to_version``
    (``runs.tools.schemas.schema_problem``). ``schemas`` holds the schema's versions by
    number.

    Raises:
        MigrationFailed: a version in between is missing, a migration step or function failed
            (a registered function that is not registered in this process, raised, or returned
            no object or what is not JSON), or the result holds what PostgreSQL cannot store
            or does not match the target version: ``"<path>: <rule>"``.
    """
    upgraded = copy.deepcopy(state)
    for version in range(from_version + 1, to_version + 1):
        schema = schemas.get(version)
        if schema is None:
            raise MigrationFailed(f"the schema has no version {version}")
        upgraded = _migrated(upgraded, schema)
    target = schemas[to_version]
    problem = unstorable(upgraded, "state") or schema_problem(target.schema, upgraded)
    if problem:
        raise MigrationFailed(
            f"the state upgraded from v{from_version} does not match "
            f"{target.name} v{to_version}: {problem}"
        )
    return upgraded
