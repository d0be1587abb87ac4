"""The 14 τ-bench airline tools by name (``TOOLS``: ``read_tools`` and ``write_tools``), run on
a world of the PostgreSQL store (``store``) by ``call`` and ``preview``.

Their behaviour and outputs follow the τ-bench airline environment (Sierra Research, MIT;
``tau_bench/envs/airline/tools``), so a replayed conversation gets the recorded outputs byte
for byte: the same JSON key order, error strings, generated ids and arithmetic.

``call`` runs one tool in one transaction that locks every document it reads. A write records
its output under its idempotency key in the same transaction, and a call whose key is already
recorded returns that output without acting again: a client killed after the write and before
reporting it gets the same output when it runs the call again.

``preview`` is the writes' dry run, for a reviewer deciding whether a write may happen: what it
would change (balances, payments, flights, a new reservation), computed by the tool itself on
the world's documents in a read-only transaction that is rolled back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path
from typing import Any

from examples.airline import read_tools, write_tools
from examples.airline.documents import Data, Table
from examples.airline.store import DEFAULT_DATA_DIR, Store, recorded_output

WRITE_TOOLS = frozenset(
    {
        "book_reservation",
        "cancel_reservation",
        "send_certificate",
        "update_reservation_baggages",
        "update_reservation_flights",
        "update_reservation_passengers",
    }
)


def is_error(output: Any) -> bool:
    """Whether ``output`` is a tool's error answer: τ-bench's tools refuse a call with a
    string that starts with ``"Error:"`` (agentops marks such a step a tool error)."""
    return isinstance(output, str) and output.startswith("Error:")


def tool_specs(data_dir: Path = DEFAULT_DATA_DIR) -> list[dict[str, Any]]:
    """The tools as OpenAI function specs (``tools.json`` of the data directory)."""
    specs: list[dict[str, Any]] = json.loads((data_dir / "tools.json").read_text())
    return specs


TOOLS: dict[str, Callable[..., str]] = {
    fn.__name__: fn
    for fn in (
        read_tools.calculate,
        read_tools.get_reservation_details,
        read_tools.get_user_details,
        read_tools.list_all_airports,
        read_tools.search_direct_flight,
        read_tools.search_onestop_flight,
        read_tools.think,
        read_tools.transfer_to_human_agents,
        write_tools.book_reservation,
        write_tools.cancel_reservation,
        write_tools.send_certificate,
        write_tools.update_reservation_baggages,
        write_tools.update_reservation_flights,
        write_tools.update_reservation_passengers,
    )
}


def _differences(before: Any, after: Any, path: str) -> list[dict[str, Any]]:
    """What differs from ``before`` to ``after`` (JSON documents), field by field: objects are
    compared key by key, a list that only grew reports the ``added`` items."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[dict[str, Any]] = []
        for key in [*before, *(k for k in after if k not in before)]:
            where = f"{path}.{key}" if path else key
            found += _differences(before.get(key), after.get(key), where)
        return found
    if isinstance(before, list) and isinstance(after, list) and after[: len(before)] == before:
        return [{"field": path, "added": after[len(before) :]}]
    return [{"field": path, "before": before, "after": after}]


def preview(store: Store, world: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the write ``name`` with ``args`` would change in ``world``, without changing it.

    The tool runs as ``call`` runs it, on the documents it reads, but in a READ ONLY
    transaction that is always rolled back: nothing is written back and no effect is
    recorded under any idempotency key. Returns ``{"outcome": the tool's output text (an
    "Error: ..." when the call would be refused), "changes": [{"document": "users/<id>",
    "field": "payment_methods.<id>.amount", "before": 245, "after": 45}, or with "added":
    [items appended to a list], ...]}``; a document the call would create has ``before``
    None. A tool that writes nothing gives ``{"outcome": None, "changes": []}`` without
    running.

    Raises:
        ValueError: unknown tool.
        TypeError: arguments that do not fit the tool (missing or unknown keys).
    """
    fn = TOOLS.get(name)
    if fn is None:
        raise ValueError(f"unknown airline tool {name!r}")
    if name not in WRITE_TOOLS:
        return {"outcome": None, "changes": []}
    with store.pool.connection() as conn, conn.transaction(force_rollback=True):
        conn.execute("SET TRANSACTION READ ONLY")
        data = Data(
            {
                kind: Table(conn, world, kind, lock=False)
                for kind in ("users", "flights", "reservations")
            }
        )
        output = fn(data, **deepcopy(args))
        changes: list[dict[str, Any]] = []
        for kind, table in data.items():
            for key, doc in table.loaded.items():
                original = table.original.get(key)
                old = json.loads(original) if original is not None else None
                if old is None:
                    changes.append({"document": f"{kind}/{key}", "before": None, "after": doc})
                    continue
                changes += [
                    {"document": f"{kind}/{key}", **change} for change in _differences(old, doc, "")
                ]
    return {"outcome": output, "changes": changes}


def call(store: Store, world: str, name: str, args: dict[str, Any], *, idempotency_key: str) -> str:
    """Run the tool ``name`` with ``args`` on ``world`` in one transaction; returns its output
    text (τ-bench's, errors included as ``"Error: ..."`` text, as the model saw them).

    A write whose ``idempotency_key`` is already recorded in the world returns the recorded
    output and changes nothing; its record keeps each document it changed before and after
    (``examples.airline.revert`` undoes it).

    Raises:
        ValueError: unknown tool.
        TypeError: arguments that do not fit the tool (missing or unknown keys).
    """
    fn = TOOLS.get(name)
    if fn is None:
        raise ValueError(f"unknown airline tool {name!r}")
    writes = name in WRITE_TOOLS
    with store.pool.connection() as conn, conn.transaction():
        if writes:
            # One write at a time per key: a second call with the key waits, then finds it.
            done = recorded_output(conn, world, idempotency_key)
            if done is not None:
                return done
        data = Data(
            {
                kind: Table(conn, world, kind, lock=writes)
                for kind in ("users", "flights", "reservations")
            }
        )
        output = fn(data, **args)
        if writes:
            changes = data.flush()
            conn.execute(
                "INSERT INTO airline_effect (world, idempotency_key, tool, output, changes) "
                "VALUES (%s, %s, %s, %s, %s)",
                [world, idempotency_key, name, output, json.dumps(changes)],
            )
        return output
