"""The compact transcript a reviewer reads before deciding: a run's conversation (OpenAI chat
messages, as agents store them) with each tool call shown once, beside its result.

The conversation is the agent's own data: any message may be of any shape. What is not a
chat message of the known shape is shown as it is (``TranscriptEntry.content``), never
refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runs.models import Step


@dataclass(frozen=True)
class TranscriptCall:
    """One tool call of an assistant message: its ``id`` (as the agent wrote it, case kept),
    ``name``, ``arguments`` (the agent's JSON text or value), and the ``result`` its tool
    message gave (``answered`` False: none in the conversation); ``under_review`` marks the
    call the approval request is about."""

    id: str
    name: str
    arguments: Any
    result: Any = None
    answered: bool = False
    under_review: bool = False


@dataclass(frozen=True)
class TranscriptEntry:
    """One message: its ``role`` (text), optional ``name``, ``content`` (text, or any JSON
    value), and its tool ``calls`` each beside its result."""

    role: str
    content: Any
    name: str = ""
    calls: list[TranscriptCall] = field(default_factory=list)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call(raw: Any, results: dict[str, Any], under_review: str) -> TranscriptCall:
    if not isinstance(raw, dict):
        return TranscriptCall(id="", name="", arguments=raw)
    function = raw.get("function")
    function = function if isinstance(function, dict) else {}
    call_id = _text(raw.get("id"))
    return TranscriptCall(
        id=call_id,
        name=_text(function.get("name")),
        arguments=function.get("arguments"),
        result=results.get(call_id),
        answered=bool(call_id) and call_id in results,
        under_review=bool(call_id) and call_id == under_review,
    )


def compact_transcript(messages: list[Any], *, under_review: str = "") -> list[TranscriptEntry]:
    """``messages`` (a conversation, any JSON) as a transcript: each assistant message's
    tool calls beside their results (the ``tool`` messages with their ``tool_call_id``), those
    tool messages not shown again; a tool message answering no call shown stays in its place.
    ``under_review`` is the tool call id of the call to decide (its step's ``tool_call_id``).
    """
    results: dict[str, Any] = {}
    called: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            results.setdefault(message["tool_call_id"], message.get("content"))
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list):
            called.update(_text(c.get("id")) for c in calls if isinstance(c, dict))
    entries = []
    for message in messages:
        if not isinstance(message, dict):
            entries.append(TranscriptEntry(role="", content=message))
            continue
        role = _text(message.get("role"))
        answers = message.get("tool_call_id")
        if role == "tool" and isinstance(answers, str) and answers in called:
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        entries.append(
            TranscriptEntry(
                role=role,
                name=_text(message.get("name")) or _text(message.get("tool_call_id")),
                content=message.get("content"),
                calls=[_call(c, results, under_review) for c in calls]
                if isinstance(calls, list)
                else [],
            )
        )
    return entries


def steps_not_in(transcript: list[TranscriptEntry], steps: list[Step]) -> list[Step]:
    """Those of ``steps`` whose result the transcript does not already show beside their call
    (matched by ``Step.tool_call_id``)."""
    shown = {call.id for entry in transcript for call in entry.calls if call.answered}
    return [step for step in steps if not (step.tool_call_id and step.tool_call_id in shown)]
