"""The compact transcript: each tool call once, beside its result; any shape an agent stored
is shown, never refused."""

from __future__ import annotations

from approvals.transcript import compact_transcript

CALL = {
    "id": "Call_AbC",
    "type": "function",
    "function": {"name": "get_booking", "arguments": "{}"},
}
DECIDE = {"id": "c2", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}


def test_a_tool_result_is_shown_beside_its_call_and_not_again():
    transcript = compact_transcript(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "Call_AbC", "content": '{"legs": 2}'},
            {"role": "assistant", "content": "mailing", "tool_calls": [DECIDE]},
        ],
        under_review="c2",
    )
    assert [entry.role for entry in transcript] == ["user", "assistant", "assistant"]
    (call,) = transcript[1].calls
    assert (call.id, call.name, call.answered, call.result) == (
        "Call_AbC",
        "get_booking",
        True,
        '{"legs": 2}',
    )
    (decide,) = transcript[2].calls
    assert decide.under_review
    assert not decide.answered


def test_a_tool_message_answering_no_call_shown_stays():
    transcript = compact_transcript([{"role": "tool", "tool_call_id": "x9", "content": "ok"}])
    assert [(e.role, e.name, e.content) for e in transcript] == [("tool", "x9", "ok")]


def test_odd_shapes_are_shown_as_they_are():
    odd = [
        "just text",
        {"role": "tool", "tool_call_id": ["not", "text"], "content": 1},
        {"role": "assistant", "tool_calls": ["x", {"id": 5, "function": "f"}, {"id": "a"}]},
        {"role": ["x"], "content": {"a": 1}},
    ]
    transcript = compact_transcript(odd)
    assert len(transcript) == 4
    assert transcript[0].content == "just text"
    assert [c.name for c in transcript[2].calls] == ["", "", ""]
    assert transcript[3].role == ""
