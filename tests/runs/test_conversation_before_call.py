"""The conversation a reviewer reads for a step: up to the assistant message that made its
call, never what was said after it (``runs.selectors.conversation_before_call``)."""

import pytest

from runs.models import AgentKind, Run, Step
from runs.selectors import conversation_before_call

pytestmark = pytest.mark.django_db

TRANSCRIPT_CONVERSATION = [
    {"role": "user", "content": "book it", "position": 0},
    {"role": "assistant", "content": "booking", "position": 1},
    {"role": "user", "content": "now cancel it", "position": 4},
    {"role": "assistant", "content": "cancelling", "position": 5},
]


def transcript_run(**input_: object) -> Run:
    return Run(agent=AgentKind.TRANSCRIPT, input=input_)


def test_a_transcript_step_reads_up_to_its_call():
    run = transcript_run(positions=[2, 6], call_positions=[1, 5])
    first, second = Step(index=0), Step(index=1)
    assert [
        m["content"] for m in conversation_before_call(run, first, TRANSCRIPT_CONVERSATION)
    ] == ["book it", "booking"]
    assert [
        m["content"] for m in conversation_before_call(run, second, TRANSCRIPT_CONVERSATION)
    ] == [
        "book it",
        "booking",
        "now cancel it",
        "cancelling",
    ]


def test_a_transcript_run_without_call_positions_stops_before_the_result():
    run = transcript_run(positions=[2, 6])
    assert [
        m["content"] for m in conversation_before_call(run, Step(index=0), TRANSCRIPT_CONVERSATION)
    ] == [
        "book it",
        "booking",
    ]


def test_a_client_step_reads_up_to_the_assistant_message_with_its_call():
    conversation = [
        {"role": "user", "content": "refund me"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "refund"}}],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "ok"},
        {"role": "user", "content": "and close my account"},
    ]
    run = Run(agent=AgentKind.CLIENT)
    shown = conversation_before_call(run, Step(index=0, tool_call_id="call_9"), conversation)
    assert shown == conversation[:2]
    # A call the client did not report: everything recorded so far.
    other = Step(index=0, tool_call_id="other")
    assert conversation_before_call(run, other, conversation) == conversation
    assert conversation_before_call(run, Step(index=0), conversation) == conversation
