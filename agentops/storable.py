"""What PostgreSQL can store: JSON and text without NUL or unpaired surrogates, numbers that
are finite, nesting it can walk. The API's parser and the services (for the pages' forms)
refuse the rest with a message saying where, instead of failing deep inside the database."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agentops.errors import InvalidInput

# How deep a request's JSON may nest (objects and lists); deeper is refused, not recursed.
MAX_JSON_DEPTH = 64


def unstorable(value: Any, where: str, depth: int = 0) -> str:
    """Where in ``value`` (parsed JSON or a string; ``where`` names it in the message) a
    string PostgreSQL cannot store sits (NUL, an unpaired surrogate), a number that is not
    finite (``1e999`` parses to infinity), or a nesting deeper than ``MAX_JSON_DEPTH``; "" when
    there is none."""
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
            found = unstorable(key, f"{where} key", depth + 1) or unstorable(
                item, f"{where}.{key}", depth + 1
            )
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = unstorable(item, f"{where}[{i}]", depth + 1)
            if found:
                return found
    return ""


def require_storable(value: Any, *, field: str, max_length: int | None = None) -> None:
    """Refuse input a service is about to store: ``value`` (a string or parsed JSON) that
    ``unstorable`` finds a problem in, or a string longer than ``max_length`` characters.

    Raises:
        InvalidInput: naming ``field``, saying what is wrong.
    """
    problem = unstorable(value, field)
    if problem:
        raise InvalidInput(problem, field=field)
    if max_length is not None and isinstance(value, str) and len(value) > max_length:
        raise InvalidInput(f"{field} must be at most {max_length} characters", field=field)
