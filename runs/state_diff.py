"""What a step changed in its run's ``state``: a diff of two JSON values, and how many changes
each step of a run made, from its checkpoints' states.

Paths are JSON Pointers (RFC 6901): ``/customer/cards/0`` is the first item of the list at
key ``cards`` of the object at key ``customer``; ``~`` and ``/`` inside a key are written
``~0`` and ``~1``; the empty path is the whole value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

Kind = Literal["added", "removed", "changed"]
ADDED: Final = "added"
REMOVED: Final = "removed"
CHANGED: Final = "changed"


@dataclass(frozen=True)
class Change:
    """One difference: at ``path`` (a JSON Pointer), a value was ``added`` (``after`` is
    it), ``removed`` (``before`` is it) or ``changed`` from ``before`` to ``after``."""

    path: str
    kind: Kind
    before: Any = None
    after: Any = None


def _pointer(path: str, key: str | int) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _same(before: Any, after: Any) -> bool:
    """Equal as JSON values: ``1`` and ``1.0`` are the same number, ``true`` is not ``1``."""
    if isinstance(before, bool) or isinstance(after, bool):
        return type(before) is type(after) and before == after
    if isinstance(before, int | float) and isinstance(after, int | float):
        return before == after
    return type(before) is type(after) and before == after


def _identical(before: Any, after: Any) -> bool:
    """Whether two objects or arrays are the same JSON, types included (``true`` is not
    ``1``), checked in C: equal as Python values and written alike (keys sorted). False when
    either cannot be written by orjson (a key that is not a string, an integer past 64 bits):
    then the caller compares them entry by entry."""
    if before != after:
        return False
    try:
        sort = orjson.OPT_SORT_KEYS
        return orjson.dumps(before, option=sort) == orjson.dumps(after, option=sort)
    except TypeError:
        return False


def json_diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """The differences from ``before`` to ``after`` (JSON values: dicts with string keys,
    lists, strings, numbers, booleans, None), in document order: objects key by key (keys
    sorted), lists item by item (items past the shorter list are added or removed), any other
    difference (another scalar, another type) as one change of the value at its path.
    ``path`` is the pointer the values sit at (empty: they are whole documents)."""
    if isinstance(before, Mapping | list) and _identical(before, after):
        # Most of a step's state is what the step before it left: skip equal subtrees whole.
        return []
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        changes: list[Change] = []
        for key in sorted(set(before) | set(after), key=str):
            at = _pointer(path, key)
            if key not in after:
                changes.append(Change(at, REMOVED, before=before[key]))
            elif key not in before:
                changes.append(Change(at, ADDED, after=after[key]))
            else:
                changes.extend(json_diff(before[key], after[key], at))
        return changes
    if isinstance(before, list) and isinstance(after, list):
        changes = []
        for index in range(max(len(before), len(after))):
            at = _pointer(path, index)
            if index >= len(after):
                changes.append(Change(at, REMOVED, before=before[index]))
            elif index >= len(before):
                changes.append(Change(at, ADDED, after=after[index]))
            else:
                changes.extend(json_diff(before[index], after[index], at))
        return changes
    if _same(before, after):
        return []
    return [Change(path, CHANGED, before=before, after=after)]


def change_count(before: Any, after: Any) -> int:
    """``len(json_diff(before, after))``, counted without building the changes (their paths
    and ``Change`` objects): a run page shows only each step's number of changes."""
    if isinstance(before, Mapping | list) and _identical(before, after):
        return 0
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        count = 0
        for key in before.keys() | after.keys():
            if key in before and key in after:
                count += change_count(before[key], after[key])
            else:
                count += 1
        return count
    if isinstance(before, list) and isinstance(after, list):
        shared = min(len(before), len(after))
        count = max(len(before), len(after)) - shared
        for index in range(shared):
            count += change_count(before[index], after[index])
        return count
    return 0 if _same(before, after) else 1


@dataclass(frozen=True)
class StepStates:
    """The run's ``state`` right ``before`` and ``after`` a step, and the ``changes``."""

    before: Any
    after: Any
    changes: list[Change] = field(default_factory=list)


def state_change_counts(steps: Iterable[Any], states: Mapping[int, Any]) -> dict[int, int]:
    """How many changes (``json_diff``, counted by ``change_count``) each step made to its
    run's state, by step id.

    ``steps`` are one run's steps in index order; ``states`` the state of each step's
    checkpoint by step id (steps without one, not succeeded, are left out). The state before a
    step is that of the latest earlier step with a checkpoint, or the run's initial state,
    ``{}``, when none has (every run starts with an empty state; a fork gets checkpoints for the
    steps it reuses).
    """
    counts: dict[int, int] = {}
    state: Any = {}
    for step in steps:
        if step.pk in states:
            after = states[step.pk]
            counts[step.pk] = change_count(state, after)
            state = after
    return counts
