"""Compensating actions: how a tool's effect is undone when its run cannot go on (a saga's
compensation, Garcia-Molina and Salem, "Sagas", SIGMOD 1987).

A tool declares its compensation by name (``declare_compensation``), so a call agentops did
not run itself (a client's, an MCP upstream's, a replayed transcript's) is compensable too: the
compensating ``tool`` (a registered tool: agentops' workers run it) and its ``args``, each
argument a path into what the original call left:

- ``args.<key>...``: the original call's arguments;
- ``result.<key>...``: its result (a result that is a string holding a JSON object, as
  τ-bench's tools answer, is read as that object);
- ``call.idempotency_key``, ``call.tool``, ``call.index``: the original call itself.

``book_reservation`` undone by ``cancel_reservation(reservation_id=result.reservation_id)`` is
``declare_compensation(["book_reservation"], Compensation("cancel_reservation",
{"reservation_id": "result.reservation_id"}))``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SOURCES = ("args", "result", "call")


class CompensationError(ValueError):
    """A declared compensation cannot be built from what the original call left (a path
    that finds nothing); the message names the path."""


@dataclass(frozen=True)
class Compensation:
    """The compensating action of a tool: the ``tool`` to call and its ``args`` as
    ``{argument: path}`` (see the module docstring for paths).

    Raises:
        ValueError: a path does not start with ``args``, ``result`` or ``call``, or has an
            empty key.
    """

    tool: str
    args: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, path in self.args.items():
            parts = path.split(".")
            if parts[0] not in SOURCES or not all(parts):
                raise ValueError(f"compensation argument {name!r}: bad path {path!r}")


_COMPENSATIONS: dict[str, Compensation] = {}


def declare_compensation(names: Iterable[str], compensation: Compensation) -> None:
    """Declare ``compensation`` the compensating action of the tools ``names``.

    Raises:
        ValueError: one of ``names`` already has a declared compensation.
    """
    names = list(names)
    taken = sorted(set(names) & set(_COMPENSATIONS))
    if taken:
        raise ValueError(f"tools {taken} already have a declared compensation")
    _COMPENSATIONS.update(dict.fromkeys(names, compensation))


def compensation_of(name: str) -> Compensation | None:
    """The compensation declared for the tool ``name``, or None (not compensable)."""
    return _COMPENSATIONS.get(name)


def _read(value: Any, keys: list[str], path: str) -> Any:
    for key in keys:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise CompensationError(f"{path}: the value before {key!r} is text") from None
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise CompensationError(f"{path}: no {key!r}")
    return value


def compensation_args(
    compensation: Compensation, *, args: dict[str, Any], result: Any, call: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of ``compensation`` for an original call with ``args``, ``result``
    (verbatim) and ``call`` (``{"idempotency_key", "tool", "index"}``).

    Raises:
        CompensationError: a path finds nothing in them.
    """
    sources = {"args": args, "result": result, "call": call}
    built = {}
    for name, path in compensation.args.items():
        source, *keys = path.split(".")
        built[name] = _read(sources[source], keys, path)
    return built
