"""Upgrading an agent state through its schema's versions: declarative steps (rename, move,
default, remove), registered functions, and the check of the result against the newer
version (``runs.state_migrations``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from runs.state_migrations import (
    MigrationFailed,
    check_steps,
    registered_migrations,
    state_migration,
    state_upgrade,
)

OBJECT: dict[str, Any] = {"type": "object"}


@dataclass
class Version:
    name: str
    version: int
    schema: Any = field(default_factory=lambda: OBJECT)
    migration_function: str = ""
    migration_steps: Any = field(default_factory=list)


@state_migration("trip", 3)
def split_route(state: dict[str, Any]) -> dict[str, Any]:
    """trip v2 -> v3: ``route`` "A-B" becomes ``origin`` and ``destination``."""
    origin, destination = state.pop("route").split("-")
    return {**state, "origin": origin, "destination": destination}


@state_migration("trip", 4)
def broken(state: dict[str, Any]) -> dict[str, Any]:
    """trip v3 -> v4: fails on every state."""
    raise KeyError("no such leg")


@state_migration("trip", 5)
def not_json(state: dict[str, Any]) -> dict[str, Any]:
    """trip v4 -> v5: returns a set inside the state."""
    return {"seen": {1, 2}}


def upgrade(state: dict[str, Any], *versions: Version, to: int | None = None) -> dict[str, Any]:
    schemas = {v.version: v for v in versions}
    return state_upgrade(state, schemas=schemas, from_version=1, to_version=to or max(schemas))


def test_each_declarative_step_does_what_it_says_and_leaves_the_input_alone():
    steps = [
        {"op": "rename", "from": "/name", "to": "/passenger"},
        {"op": "move", "from": "/legs/0", "to": "/first_leg"},
        {"op": "default", "path": "/cabin", "value": {"class": "economy"}},
        {"op": "default", "path": "/seats", "value": 1},
        {"op": "remove", "path": "/scratch"},
        {"op": "remove", "path": "/never_there"},
        {"op": "rename", "from": "/never_there", "to": "/still_not"},
    ]
    assert check_steps(steps) is None
    before = {"name": "Ann", "legs": ["LHR-JFK", "JFK-SFO"], "seats": 2, "scratch": [1]}
    after = upgrade(before, Version("trip", 1), Version("trip", 2, migration_steps=steps))
    assert after == {
        "passenger": "Ann",
        "legs": ["JFK-SFO"],
        "first_leg": "LHR-JFK",
        "cabin": {"class": "economy"},
        "seats": 2,
    }
    assert before == {"name": "Ann", "legs": ["LHR-JFK", "JFK-SFO"], "seats": 2, "scratch": [1]}


def test_versions_chain_steps_and_registered_functions_in_order():
    assert registered_migrations("trip", 3) == [f"{__name__}.split_route"]
    v2 = Version("trip", 2, migration_steps=[{"op": "rename", "from": "/path", "to": "/route"}])
    v3_schema = {
        "type": "object",
        "required": ["origin", "destination"],
        "properties": {"origin": {"type": "string", "minLength": 3}},
    }
    v3 = Version("trip", 3, schema=v3_schema, migration_function=f"{__name__}.split_route")
    assert upgrade({"path": "LHR-JFK"}, Version("trip", 1), v2, v3) == {
        "origin": "LHR",
        "destination": "JFK",
    }
    with pytest.raises(MigrationFailed, match="origin: 'X' is too short"):
        upgrade({"path": "X-JFK"}, Version("trip", 1), v2, v3)


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        ([Version("trip", 2, migration_function=f"{__name__}.broken")], "KeyError: 'no such leg'"),
        ([Version("trip", 2, migration_function="elsewhere.gone")], "is not registered"),
        ([Version("trip", 2, migration_function=f"{__name__}.not_json")], "is not JSON"),
        (
            [Version("trip", 2, migration_steps=[{"op": "move", "from": "/a", "to": "/x/y"}])],
            "step \\[0\\] \\(move\\)",
        ),
        ([Version("trip", 3)], "has no version 2"),
    ],
)
def test_a_migration_that_cannot_apply_is_reported_not_raised_as_is(versions, message):
    with pytest.raises(MigrationFailed, match=message):
        upgrade({"a": 1}, Version("trip", 1), *versions)


@pytest.mark.parametrize(
    "steps",
    [
        "rename",
        [{"op": "rename", "from": "/a"}],
        [{"op": "rename", "from": "/a", "to": "/b", "extra": 1}],
        [{"op": "remove", "path": ""}],
        [{"op": "remove", "path": "/a~2"}],
        [{"op": "default", "path": "/a", "value": "\x00"}],
        [{"op": "noop"}] * 101,
    ],
)
def test_malformed_steps_are_named(steps):
    assert check_steps(steps)


def test_a_function_registered_twice_under_one_path_is_refused():
    def twin(state: dict[str, Any]) -> dict[str, Any]:
        return state

    twin.__qualname__ = "split_route"
    with pytest.raises(ValueError, match="already registered"):
        state_migration("trip", 3)(twin)
    with pytest.raises(ValueError, match="version 2 or later"):
        state_migration("trip", 1)
