"""Governed tools and model turns of a LangGraph graph (issue 34, item 3).

``governed_tool_node(tools, run)`` is LangGraph's ``ToolNode`` whose every tool call runs as a
client step of ``run`` (``RunHandle.call_tool``): classified by the risk rules, held at the
approval gate when its risk needs a reviewer, recorded once in the tool-call ledger under an
idempotency key derived from the thread, the checkpoint the node runs after and the tool
call id. So a graph resumed after a crash mid-node gets the recorded result of every call
whose effect is on record instead of making it again; a call a reviewer rejected comes back
to the model as the tool's message (``Rejected by <reviewer>: <reason>``, status error); one
approved with edited arguments runs with the edited arguments.

``AgentOpsCallbackHandler(run)`` is a LangChain callback handler recording each chat model
turn of the graph in the run: the new messages (OpenAI chat format), its tokens and latency,
and what drove it (the agent's name and version, the system prompt, the model's parameters).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import BaseMessage, ToolMessage, convert_to_openai_messages
from langchain_core.outputs import LLMResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agentops_client.handle import AsyncRunHandle
from agentops_client.models import Rejected
from agentops_client.sync import RunHandle

# What a tool node's execute gives back.
Executed = ToolMessage | Command
# The chat model's invocation parameters reported as the model's parameters (never its
# client options: base URL, keys, headers).
MODEL_PARAMETERS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "reasoning_effort",
    "n",
)


def call_id_of(request: ToolCallRequest) -> str:
    """The call id a tool call's idempotency key is made of: ``<thread id>:<checkpoint
    id>:<tool call id>``, the checkpoint being the one the node runs after (LangGraph's
    ``checkpoint_map``, innermost graph last), the same when a resumed graph runs the node
    again from that checkpoint."""
    conf = request.runtime.config.get("configurable", {})
    checkpoints = list((conf.get("checkpoint_map") or {}).values())
    checkpoint = checkpoints[-1] if checkpoints else conf.get("checkpoint_id") or ""
    return f"{conf.get('thread_id', '')}:{checkpoint}:{request.tool_call['id']}"


def _schema(tool: BaseTool | None) -> dict[str, Any] | None:
    if tool is None:
        return None
    parameters: dict[str, Any] = convert_to_openai_tool(tool)["function"]["parameters"]
    return parameters


def _edited(request: ToolCallRequest, args: dict[str, Any]) -> ToolCallRequest:
    """The request with the final arguments. Unedited ones go to the tool as the model wrote
    them: agentops stores them as JSON values, which need not keep the order of their keys
    (a tool that echoes them, as a booking's passengers, would answer differently)."""
    if args == request.tool_call["args"]:
        return request
    return request.override(tool_call={**request.tool_call, "args": args})


def _content(executed: Executed, errors: list[bool]) -> Any:
    """What the ledger records of a tool's message: its content (a string or content
    blocks); ``errors`` learns whether the tool answered with an error."""
    if not isinstance(executed, ToolMessage):
        raise TypeError("a governed tool must answer with a message, not a Command")
    errors.append(executed.status == "error")
    return executed.content


def _step(request: ToolCallRequest, errors: list[bool]) -> dict[str, Any]:
    """``call_tool``'s arguments for a tool call but the function."""
    return {
        "name": request.tool_call["name"],
        "args": request.tool_call["args"],
        "args_schema": _schema(request.tool),
        "call_id": call_id_of(request),
        "error_when": lambda _: bool(errors and errors[-1]),
    }


def _message(request: ToolCallRequest, outcome: Any, errors: list[bool]) -> ToolMessage:
    call = request.tool_call
    if isinstance(outcome, Rejected):
        content: Any = str(outcome)
        status = "error"
    else:
        content = outcome if isinstance(outcome, str | list) else json.dumps(outcome)
        status = "error" if errors and errors[-1] else "success"
    return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"], status=status)


def governed_tool_node(
    tools: Sequence[BaseTool | Callable[..., Any]],
    run: RunHandle | AsyncRunHandle,
    **options: Any,
) -> ToolNode:
    """LangGraph's ``ToolNode(tools, **options)`` whose tool calls run as client steps of
    ``run``. With a ``RunHandle`` (sync client) the graph may be invoked or awaited; with an
    ``AsyncRunHandle`` it must be awaited (``ainvoke``, ``astream``) on the client's loop:
    a sync invocation is refused rather than run ungoverned.

    Each node run reattaches to the run (``resume``), so call ids count from the start
    again: the same call after the same checkpoint is the same step.
    """

    def wrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Executed]) -> Executed:
        if not isinstance(run, RunHandle):
            raise TypeError("a graph governed through an AsyncRunHandle runs with ainvoke")
        errors: list[bool] = []

        def run_tool(**final: Any) -> Any:
            return _content(execute(_edited(request, final)), errors)

        outcome = run.client.resume(run.run_id).call_tool(fn=run_tool, **_step(request, errors))
        return _message(request, outcome, errors)

    async def awrap(
        request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Executed]]
    ) -> Executed:
        assert isinstance(run, AsyncRunHandle)
        errors: list[bool] = []

        async def run_tool(**final: Any) -> Any:
            return _content(await execute(_edited(request, final)), errors)

        handle = run.client.resume(run.run_id)
        outcome = await handle.call_tool(fn=run_tool, **_step(request, errors))
        return _message(request, outcome, errors)

    if isinstance(run, RunHandle):
        return ToolNode(tools, wrap_tool_call=wrap, **options)
    return ToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=awrap, **options)


class AgentOpsCallbackHandler(AsyncCallbackHandler):
    """Records each chat model turn in ``run``: the messages new since the last turn (the
    user's, tool results) and the model's answer, in OpenAI chat format, with ``usage``
    (``model``, ``input_tokens``, ``output_tokens`` in tokens, as the model reported them in
    ``usage_metadata``; ``latency_ms`` in ms from the model's start to its end). Pass it in
    the graph's config: ``{"callbacks": [AgentOpsCallbackHandler(run)]}``.

    A handler new to a run that holds turns already (a new process resuming the graph from
    its last checkpoint, a handler per invocation) reads how many messages the run holds
    and takes them as the start of what the model is sent, so it records only what is new.

    What drove each turn goes with it when it differs from what the last turn sent:
    ``agent_name`` and ``agent_version`` (given here), the system prompt (the first system
    message the model is sent, labelled ``prompt_name`` and ``prompt_version``) and the
    model's ``MODEL_PARAMETERS`` among its invocation parameters.
    """

    def __init__(
        self,
        run: RunHandle | AsyncRunHandle,
        *,
        agent_name: str = "",
        agent_version: str = "",
        prompt_name: str = "",
        prompt_version: str = "",
    ) -> None:
        self.run = run
        self.fixed = {
            key: value
            for key, value in (("agent_name", agent_name), ("agent_version", agent_version))
            if value
        }
        self.prompt_name, self.prompt_version = prompt_name, prompt_version
        # How many of the messages the model is sent are recorded already (None: not read).
        self._seen: int | None = None
        self._started: dict[UUID, tuple[float, list[BaseMessage], str, dict[str, Any]]] = {}
        self._sent: dict[str, Any] = {}

    def _identity_of(self, sent: list[BaseMessage], params: dict[str, Any]) -> dict[str, Any]:
        identity: dict[str, Any] = dict(self.fixed)
        chosen = {name: params[name] for name in MODEL_PARAMETERS if params.get(name) is not None}
        identity["model_parameters"] = json.loads(json.dumps(chosen, default=str))
        system = next((message for message in sent if message.type == "system"), None)
        if system is not None and isinstance(system.content, str) and system.content:
            identity["prompt"] = {
                "content": system.content,
                "name": self.prompt_name,
                "version": self.prompt_version,
            }
        return identity

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        sent = messages[0] if messages else []
        if self._seen is None:
            self._seen = min(await self._recorded(), len(sent))
        params = kwargs.get("invocation_params") or {}
        model = str(params.get("model") or params.get("model_name") or params.get("_type") or "")
        identity = self._identity_of(list(sent), params)
        self._started[run_id] = (time.monotonic(), list(sent[self._seen :]), model, identity)
        self._seen = len(sent)

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        started, new, model, identity = self._started.pop(run_id, (time.monotonic(), [], "", {}))
        latency_ms = int((time.monotonic() - started) * 1000)
        answers = [
            generation.message
            for generation in response.generations[0]
            if hasattr(generation, "message")
        ]
        self._seen = (self._seen or 0) + len(answers)
        usage_of = getattr(answers[0], "usage_metadata", None) if answers else None
        usage = {
            "model": model or "unknown",
            "input_tokens": int((usage_of or {}).get("input_tokens", 0)),
            "output_tokens": int((usage_of or {}).get("output_tokens", 0)),
            "latency_ms": latency_ms,
        }
        messages = json.loads(json.dumps(convert_to_openai_messages([*new, *answers]), default=str))
        if messages:
            changed = {k: v for k, v in identity.items() if self._sent.get(k) != v}
            await self._record(messages, usage, str(run_id), changed)
            self._sent.update(changed)

    async def _recorded(self) -> int:
        """How many messages the run holds."""
        if isinstance(self.run, RunHandle):
            page = self.run.client.submit(self.run.aio.client.messages(self.run.run_id, last=1))
            return int((await asyncio.wrap_future(page))["message_count"])
        return int((await self.run.client.messages(self.run.run_id, last=1))["message_count"])

    async def _record(
        self,
        messages: list[dict[str, Any]],
        usage: dict[str, Any],
        turn: str,
        identity: dict[str, Any],
    ) -> None:
        if isinstance(self.run, RunHandle):
            record = self.run.aio.record_turn(messages, usage, turn_id=turn, **identity)
            await asyncio.wrap_future(self.run.client.submit(record))
        else:
            await self.run.record_turn(messages, usage, turn_id=turn, **identity)
