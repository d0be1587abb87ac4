"""Undoing an airline write: the compensating action of the six write tools.

τ-bench's own ``cancel_reservation`` cannot undo a booking: it keeps the reservation (status
``cancelled``, refunds appended to its payment history), leaves it in the user's list and
gives no gift-card balance or certificate back. ``revert_write(idempotency_key)`` puts back
exactly what the write recorded under that key changed (``airline_effect.changes``): each
document as it was before, a document the write added removed. It refuses, changing nothing,
when a document is no longer as the write left it (something else wrote it since: a later
write must be undone first, as a saga undoes its steps last first).

Like the writes, it runs in one transaction and records its own output under its own
idempotency key, so calling it again with that key returns the recorded output and acts once.
"""

from __future__ import annotations

import json
from typing import Any

from examples.airline.store import Store, recorded_output

TOOL = "revert_write"
SCHEMA = {
    "type": "object",
    "properties": {"idempotency_key": {"type": "string", "minLength": 1}},
    "required": ["idempotency_key"],
    "additionalProperties": False,
}


def _current(conn: Any, world: str, kind: str, key: str) -> str | None:
    row = conn.execute(
        "SELECT doc FROM airline_doc WHERE world = %s AND kind = %s AND key = %s FOR UPDATE",
        [world, kind, key],
    ).fetchone()
    return str(row[0]) if row else None


def revert_write(store: Store, world: str, write_key: str, *, idempotency_key: str) -> str:
    """Undo the write recorded in ``world`` under ``write_key``; this call's own output is
    recorded under ``idempotency_key`` (a second call with it returns that output, acting
    once). Returns ``"Reverted <tool> <write_key>: <n> documents restored."``, or an
    ``"Error: ..."`` text, changing nothing, when no write is recorded under ``write_key``
    or a document it changed has changed since."""
    with store.pool.connection() as conn, conn.transaction():
        done = recorded_output(conn, world, idempotency_key)
        if done is not None:
            return done
        found = conn.execute(
            "SELECT tool, changes FROM airline_effect WHERE world = %s AND idempotency_key = %s",
            [world, write_key],
        ).fetchone()
        if found is None or found[1] is None:
            return f"Error: no write recorded under {write_key}"
        tool, changes = str(found[0]), json.loads(found[1])
        undone: dict[str, dict[str, list[str | None]]] = {}
        for kind, documents in changes.items():
            for key, (before, after) in documents.items():
                now = _current(conn, world, kind, key)
                if now != after:
                    return f"Error: {kind}/{key} changed since {write_key}"
                undone.setdefault(kind, {})[key] = [now, before]
        for kind, documents in changes.items():
            for key, (before, _after) in documents.items():
                if before is None:
                    conn.execute(
                        "DELETE FROM airline_doc WHERE world = %s AND kind = %s AND key = %s",
                        [world, kind, key],
                    )
                else:
                    conn.execute(
                        "INSERT INTO airline_doc (world, kind, key, doc) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (world, kind, key) DO UPDATE SET doc = EXCLUDED.doc",
                        [world, kind, key, before],
                    )
        count = sum(len(documents) for documents in changes.values())
        output = f"Reverted {tool} {write_key}: {count} documents restored."
        conn.execute(
            "INSERT INTO airline_effect (world, idempotency_key, tool, output, changes) "
            "VALUES (%s, %s, %s, %s, %s)",
            [world, idempotency_key, TOOL, output, json.dumps(undone)],
        )
        return output
