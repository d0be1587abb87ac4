"""The documents one airline tool call works on, in one world of the PostgreSQL store
(``airline_doc``, see ``store``): ``Table`` holds the documents of one kind (users, flights or
reservations), read on demand and written back by ``flush``; ``Data`` holds a call's three
tables and is what every tool (``read_tools``, ``write_tools``) takes as its first argument.
``tools.call`` and ``tools.preview`` build them inside their transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

from psycopg import Connection, sql


class Table(MutableMapping[str, Any]):
    """The documents of one kind in one world, read on demand (locked ``FOR UPDATE`` when
    the call writes); documents read or added are written back by ``flush``."""

    def __init__(self, conn: Connection[Any], world: str, kind: str, lock: bool) -> None:
        self.conn, self.world, self.kind, self.lock = conn, world, kind, lock
        self.loaded: dict[str, Any] = {}
        self.original: dict[str, str | None] = {}
        self.complete = False

    def _select(self, key: str | None) -> list[tuple[str, str]]:
        # One document (``key``) or all of this kind, in key order; locked when writing.
        query = sql.SQL(
            "SELECT key, doc FROM airline_doc WHERE world = %s AND kind = %s {} ORDER BY key {}"
        ).format(
            sql.SQL("AND key = %s" if key is not None else ""),
            sql.SQL("FOR UPDATE" if self.lock else ""),
        )
        params = [self.world, self.kind] + ([key] if key is not None else [])
        return [(str(k), str(d)) for k, d in self.conn.execute(query, params)]

    def _load(self, key: str) -> None:
        if key in self.original or self.complete:
            return
        rows = self._select(key)
        self.original[key] = rows[0][1] if rows else None
        if rows:
            self.loaded[key] = json.loads(rows[0][1])

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        self._load(key)
        return key in self.loaded

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return self.loaded[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._load(key)
        self.loaded[key] = value

    def __delitem__(self, key: str) -> None:
        raise NotImplementedError("the airline tools never delete documents")

    def _all(self) -> dict[str, Any]:
        if not self.complete:
            # In the data files' order: search results list flights in that order.
            for key, doc in self._select(None):
                if key not in self.original:
                    self.original[key] = doc
                    self.loaded[key] = json.loads(doc)
            self.complete = True
        return self.loaded

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def flush(self) -> dict[str, list[str | None]]:
        """Write back every document that changed or was added; returns each one's
        ``[before, after]`` text by key (before: None for a document added)."""
        changed: dict[str, list[str | None]] = {}
        for key, doc in self.loaded.items():
            text = json.dumps(doc)
            if self.original.get(key) == text:
                continue
            changed[key] = [self.original.get(key), text]
            self.conn.execute(
                "INSERT INTO airline_doc (world, kind, key, doc) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (world, kind, key) DO UPDATE SET doc = EXCLUDED.doc",
                [self.world, self.kind, key, text],
            )
        return changed


class Data(dict[str, Table]):
    """The three tables of one world for one call."""

    def flush(self) -> dict[str, dict[str, list[str | None]]]:
        """Write back every table; returns the documents that changed (``Table.flush``) by
        kind."""
        return {kind: changed for kind, table in self.items() if (changed := table.flush())}
