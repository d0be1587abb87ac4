"""What a memory write changes in an item's value: a list of JSON Patch operations (RFC
6902, made by the ``jsonpatch`` library) with the value before each, for the item's history
and a reviewer's diff of a proposed write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
import jsonpointer

from memory.models import MemoryOperation, MemoryVersion


@dataclass(frozen=True)
class ValueChange:
    """One change at ``path`` (a JSON Pointer, RFC 6901; "" is the whole value): ``kind``
    added, removed or changed, with the value ``before`` and ``after`` it."""

    path: str
    kind: str
    before: Any = None
    after: Any = None


_KINDS = {"add": "added", "remove": "removed", "replace": "changed"}


def value_diff(before: Any, after: Any) -> list[ValueChange]:
    """The changes from ``before`` to ``after`` (JSON values; None before: all added; None
    after: all removed), as a minimal JSON Patch, moves and copies spelt out as additions."""
    if before is None or after is None:
        if before == after:
            return []
        kind = "added" if before is None else "removed"
        return [ValueChange("", kind, before, after)]
    changes = []
    for operation in jsonpatch.make_patch(before, after).patch:
        path = operation["path"]
        kind = _KINDS.get(operation["op"], "added")
        old = jsonpointer.resolve_pointer(before, path, None) if kind != "added" else None
        new = jsonpointer.resolve_pointer(after, path, None) if kind != "removed" else None
        changes.append(ValueChange(path, kind, old, new))
    return changes


@dataclass(frozen=True)
class VersionChanges:
    """A kept version and what it changed from the version before it."""

    version: MemoryVersion
    changes: list[ValueChange]


def version_changes(versions: Sequence[MemoryVersion]) -> list[VersionChanges]:
    """Each of ``versions`` (newest first, as ``memory_item_history`` gives them) with its
    changes from the next older one (a deletion or expiry removes the whole value)."""
    rows = []
    for i, version in enumerate(versions):
        older = versions[i + 1].value if i + 1 < len(versions) else None
        after = version.value if version.operation == MemoryOperation.PUT else None
        before = older if version.operation == MemoryOperation.PUT else version.value
        rows.append(VersionChanges(version, value_diff(before, after)))
    return rows
