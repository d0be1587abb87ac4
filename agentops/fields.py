"""Model fields of the core: JSON that PostgreSQL holds at any depth, read back without
Python's parser giving up on it."""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import models

from agentops.storable import MAX_JSON_DEPTH

# A JSON string (its escapes included) or a bracket: what the depth of JSON text depends on.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def cut_json_text(text: str, max_depth: int) -> str:
    """Valid JSON ``text`` with each object or array nested deeper than ``max_depth`` levels
    replaced by a JSON string saying so, found by a scan without recursion (the text of a
    5,000-level document is read as easily as any other)."""
    note = json.dumps(f"… nested deeper than {max_depth} levels: not read")
    pieces: list[str] = []
    copied_to = 0
    depth = 0
    for token in _TOKENS.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth == max_depth + 1:
                pieces += [text[copied_to : token.start()], note]
        elif bracket in "]}":
            if depth == max_depth + 1:
                copied_to = token.end()
            depth -= 1
    pieces.append(text[copied_to:])
    return "".join(pieces)


class DeepJSONField(models.JSONField):
    """A ``JSONField`` whose stored documents too deep for Python's parser (PostgreSQL's
    ``jsonb`` nests any depth, ``json.loads`` stops near ``sys.getrecursionlimit()`` levels
    with a RecursionError) are read with their objects and arrays past ``MAX_JSON_DEPTH``
    levels replaced by a note (``cut_json_text``), so a page that shows them answers. Only
    SQL written past the services can store such a document: the API and the services refuse
    input nested deeper than ``MAX_JSON_DEPTH`` (``agentops.storable``). Saved back, the value
    keeps the note, not the cut levels."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        try:
            return super().from_db_value(value, expression, connection)
        except RecursionError:
            cut = cut_json_text(value, MAX_JSON_DEPTH)
            return super().from_db_value(cut, expression, connection)
