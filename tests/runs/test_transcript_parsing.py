"""Turning a chat-format conversation into transcript steps."""

import json

import pytest

from agentops.errors import InvalidInput
from runs.agents import parse_transcript


def call(call_id: str, name: str, args: dict) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def test_each_tool_call_becomes_a_step_with_its_recorded_output_and_rationale():
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "cancel ABC"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [call("c1", "get_reservation_details", {"reservation_id": "ABC"})],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "get_reservation_details",
            "content": '{"id": "ABC"}',
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c2", "cancel_reservation", {"reservation_id": "ABC"})],
        },
        {"role": "tool", "tool_call_id": "c2", "name": "cancel_reservation", "content": "done"},
        {"role": "assistant", "content": "Cancelled."},
    ]
    steps, conversation = parse_transcript(messages)
    assert [(s.tool, s.args, s.recorded_result) for s in steps] == [
        ("get_reservation_details", {"reservation_id": "ABC"}, '{"id": "ABC"}'),
        ("cancel_reservation", {"reservation_id": "ABC"}, "done"),
    ]
    assert steps[0].rationale == "Let me check."
    # No text of its own and none since the last tool result: no rationale is invented.
    assert steps[1].rationale == ""
    assert [m["role"] for m in conversation] == ["user", "assistant", "assistant"]
    assert conversation[0] == {"role": "user", "content": "cancel ABC", "position": 1}


def test_repeated_tool_call_ids_match_tool_messages_in_order():
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call("same", "get_a", {})]},
        {"role": "tool", "tool_call_id": "same", "name": "get_a", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": [call("same", "get_b", {})]},
        {"role": "tool", "tool_call_id": "same", "name": "get_b", "content": "second"},
    ]
    steps, _ = parse_transcript(messages)
    assert [s.recorded_result for s in steps] == ["first", "second"]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ("not a list", "must be a list"),
        ([{"role": "robot", "content": "x"}], "role in"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{oops"}}],
                }
            ],
            "not valid JSON",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "[1]"}}],
                }
            ],
            "JSON object",
        ),
        ([{"role": "assistant", "tool_calls": [call("x", "f", {})]}], "no recorded tool message"),
    ],
)
def test_malformed_transcripts_are_refused_with_the_reason(messages, reason):
    with pytest.raises(InvalidInput, match=reason):
        parse_transcript(messages)
