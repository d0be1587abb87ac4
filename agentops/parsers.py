"""The API's request parser: JSON that PostgreSQL can store, or a 400 saying why not (NUL,
unpaired surrogates, numbers that overflow to infinity such as ``1e999``, absurd nesting).

Kept apart from ``agentops.api``: DRF imports parsers while loading its settings, before its
views can be imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions
from rest_framework.parsers import JSONParser

# How deep a request's JSON may nest (objects and lists); deeper is refused, not recursed.
MAX_JSON_DEPTH = 64


def _unstorable(value: Any, where: str, depth: int = 0) -> str:
    """Where in ``value`` a string PostgreSQL's JSON cannot store sits (NUL, an unpaired
    surrogate), a number that is not finite (``1e999`` parses to infinity), or a nesting deeper
    than ``MAX_JSON_DEPTH``; "" when there is none."""
    if depth > MAX_JSON_DEPTH:
        return f"{where}: nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: numbers must be finite (not {value})"
    if isinstance(value, str):
        if "\x00" in value:
            return f"{where}: strings may not contain NUL (\\u0000)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where}: strings may not contain unpaired surrogates"
        return ""
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _unstorable(key, f"{where} key", depth + 1) or _unstorable(
                item, f"{where}.{key}", depth + 1
            )
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _unstorable(item, f"{where}[{i}]", depth + 1)
            if found:
                return found
    return ""


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, refusing with a 400 what would otherwise fail deep inside: strings
    with NUL or unpaired surrogates (PostgreSQL's ``jsonb`` and UTF-8 cannot hold them) and
    nesting deeper than ``MAX_JSON_DEPTH``."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(
                f"JSON parse error: nested deeper than {MAX_JSON_DEPTH} levels"
            ) from None
        problem = _unstorable(data, "body")
        if problem:
            raise exceptions.ParseError(problem)
        return data
