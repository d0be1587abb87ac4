"""JSON that PostgreSQL holds deeper than Python's parser follows is read cut to
``MAX_JSON_DEPTH`` levels with a note (``agentops.fields``), never a RecursionError."""

from __future__ import annotations

import json

from agentops.fields import cut_json_text


def note(levels: int) -> str:
    return f"… nested deeper than {levels} levels: not read"


def test_only_brackets_outside_strings_count():
    value = {"a": [["[{", '"]]\\'], {"b": [1]}], "c": "}"}
    text = json.dumps(value)
    assert json.loads(cut_json_text(text, 2)) == {"a": [note(2), note(2)], "c": "}"}
    assert json.loads(cut_json_text(text, 3)) == {"a": [["[{", '"]]\\'], {"b": note(3)}], "c": "}"}
    assert cut_json_text(text, 4) == text


def test_a_document_5000_levels_deep_is_cut():
    assert json.loads(cut_json_text("[" * 5000 + "]" * 5000, 3)) == [[[note(3)]]]
