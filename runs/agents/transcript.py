"""Replaying a recorded OpenAI chat-completions conversation (τ-bench shape)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentops.errors import InvalidInput
from runs.agents.base import MAX_TOOL_NAME, Agent, Prepared, StepSpec

if TYPE_CHECKING:
    from runs.models import Run

ROLES = {"system", "user", "assistant", "tool"}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def parse_transcript(messages: Any) -> tuple[list[StepSpec], list[dict[str, Any]]]:
    """Split a chat-format message list into step specs and the kept conversation.

    Each assistant ``tool_calls`` entry becomes a step in order: ``function.name`` is the tool,
    ``function.arguments`` (a JSON string) the args, the first later ``tool`` message with the
    same ``tool_call_id`` not yet matched is the recorded result (verbatim ``content``; ids can
    repeat in one conversation, so matching is positional). The rationale is the text of the
    assistant message carrying the call or, when that is empty, the last assistant text since
    the previous tool result. The conversation keeps user and assistant messages that have text,
    each with its ``position`` in the original list.

    Raises:
        InvalidInput: not a list of messages, an unknown role, ``tool_calls`` that is not a
            list, a tool name or call id longer than a step holds (``MAX_TOOL_NAME``),
            arguments that are not a JSON object, or a tool call with no recorded tool message.
    """
    if not isinstance(messages, list):
        raise InvalidInput("transcript must be a list of messages", field="transcript")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise InvalidInput(
                f"transcript[{i}] must be an object with role in {sorted(ROLES)}",
                field=f"transcript[{i}]",
            )
    specs: list[StepSpec] = []
    conversation: list[dict[str, Any]] = []
    matched: set[int] = set()
    last_text = ""
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            last_text = ""
            continue
        if role in ("user", "assistant") and _text(message):
            conversation.append({"role": role, "content": _text(message), "position": i})
        if role != "assistant":
            continue
        if _text(message):
            last_text = _text(message)
        tool_calls = message.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            where = f"transcript[{i}]"
            raise InvalidInput(f"{where}.tool_calls must be a list", field=where)
        for j, call in enumerate(tool_calls):
            where = f"transcript[{i}].tool_calls[{j}]"
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                function = {}
            name = function.get("name")
            if not isinstance(name, str) or not 0 < len(name) <= MAX_TOOL_NAME:
                raise InvalidInput(
                    f"{where} needs function.name, 1 to {MAX_TOOL_NAME} characters", field=where
                )
            raw_args = function.get("arguments") or "{}"
            try:
                args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
            except json.JSONDecodeError as exc:
                raise InvalidInput(
                    f"{where}.function.arguments is not valid JSON: {exc}", field=where
                ) from None
            if not isinstance(args, dict):
                raise InvalidInput(f"{where}.function.arguments must be a JSON object", field=where)
            call_id = str(call.get("id", ""))
            if len(call_id) > MAX_TOOL_NAME:
                raise InvalidInput(
                    f"{where}.id must be at most {MAX_TOOL_NAME} characters", field=where
                )
            result_at = next(
                (
                    k
                    for k in range(i + 1, len(messages))
                    if k not in matched
                    and messages[k]["role"] == "tool"
                    and str(messages[k].get("tool_call_id", "")) == call_id
                ),
                None,
            )
            if result_at is None:
                raise InvalidInput(f"{where} ({call_id}) has no recorded tool message", field=where)
            matched.add(result_at)
            specs.append(
                StepSpec(
                    tool=name,
                    args=args,
                    rationale=last_text,
                    tool_call_id=call_id,
                    recorded_result=messages[result_at].get("content"),
                    position=result_at,
                    call_position=i,
                )
            )
    return specs, conversation


class TranscriptAgent(Agent):
    kind = "transcript"
    # Tools of imported conversations are the recorded system's, not ours: only their risk is
    # classified (by policy rules), their output is the recorded one.
    needs_registered_tools = False

    def prepare(self, payload: dict[str, Any]) -> Prepared:
        if payload.get("transcript") is None:
            raise InvalidInput(
                "a transcript run needs transcript (a message list)", field="transcript"
            )
        steps, conversation = parse_transcript(payload["transcript"])
        return Prepared(
            steps=steps,
            conversation=conversation,
            input={
                "positions": [spec.position for spec in steps],
                "call_positions": [spec.call_position for spec in steps],
            },
        )

    def checkpoint_state(self, run: Run, *, index: int, tool: str, result: Any) -> dict[str, Any]:
        state = super().checkpoint_state(run, index=index, tool=tool, result=result)
        positions = run.input.get("positions") or []
        if index < len(positions):
            # How far into the recorded conversation the agent has got: its tool message.
            state["conversation_position"] = positions[index]
        return state
