"""The API's request parser: JSON that PostgreSQL can store, or a 400 saying why not (NUL,
unpaired surrogates, numbers that overflow to infinity such as ``1e999``, absurd nesting).

Kept apart from ``agentops.api``: DRF imports parsers while loading its settings, before its
views can be imported.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.parsers import JSONParser

from agentops.storable import MAX_JSON_DEPTH, unstorable


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
        problem = unstorable(data, "body")
        if problem:
            raise exceptions.ParseError(problem)
        return data


class MergePatchParser(StrictJSONParser):
    """A JSON Merge Patch body (RFC 7396 §4, ``application/merge-patch+json``), checked like
    any JSON body."""

    media_type = "application/merge-patch+json"


class JsonPatchParser(StrictJSONParser):
    """A JSON Patch body (RFC 6902 §6, ``application/json-patch+json``), checked like any JSON
    body."""

    media_type = "application/json-patch+json"
