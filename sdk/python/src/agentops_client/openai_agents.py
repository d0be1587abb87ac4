"""The OpenAI Agents SDK under agentops (needs the ``openai-agents`` extra).

``govern(agent, handle)`` returns a clone of an ``agents.Agent`` whose function tools run as
client steps of the run ``handle`` drives: each call is classified, waits for a reviewer when
its risk needs one, runs with the final (possibly edited) arguments, and is recorded in the
ledger once; a refusal reaches the model as the tool's output ("Rejected by <reviewer>:
<reason>") so it can choose another way. ``AgentOpsHooks(handle)`` records every model turn
(the new messages in OpenAI chat format, the tokens it used and its latency) as the run's
conversation and usage. Pass both to ``Runner.run``::

    run = await client.start_run("Change my flight", metadata={"ticket": 123})
    result = await Runner.run(govern(agent, run), "Please move me to the 9 am flight",
                              hooks=AgentOpsHooks(run))
    await run.complete()

``AgentOpsSession(client, session_id)`` keeps the agent's conversation in an agentops session
(the Agents SDK's ``Session`` protocol), so a later process, or the same one after a restart,
goes on where the last turn left it::

    session = AgentOpsSession(client, (await client.create_session("chat-42")).id)
    result = await Runner.run(agent, "And tomorrow?", session=session)
    await session.compact()  # older items replaced by the server summarizer's summary
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any, cast

from agents import Agent, FunctionTool, RunContextWrapper, RunHooks
from agents.items import ModelResponse, TResponseInputItem
from agents.models.chatcmpl_converter import Converter
from agents.tool_context import ToolContext

from agentops_client.aio import AsyncClient
from agentops_client.handle import AsyncRunHandle, current_step
from agentops_client.models import Rejected

# The message keys agentops keeps (OpenAI chat format).
MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}


def govern(
    agent: Agent[Any],
    handle: AsyncRunHandle,
    *,
    error_when: Callable[[Any], bool] | None = None,
) -> Agent[Any]:
    """A clone of ``agent`` whose function tools run as client steps of ``handle``'s run
    (other tools are kept as they are). ``error_when(output)`` (optional) tells the tools'
    error answers (e.g. ``"Error: ..."`` strings), which are reported as tool errors."""
    tools = [
        _governed(tool, handle, error_when) if isinstance(tool, FunctionTool) else tool
        for tool in agent.tools
    ]
    return agent.clone(tools=tools)


def _governed(
    tool: FunctionTool, handle: AsyncRunHandle, error_when: Callable[[Any], bool] | None
) -> FunctionTool:
    async def invoke(ctx: ToolContext[Any], raw: str) -> Any:
        try:
            args = json.loads(raw or "{}")
        except ValueError:
            return f"Error: the arguments of {tool.name} are not JSON"
        if not isinstance(args, dict):
            return f"Error: the arguments of {tool.name} must be an object"

        async def run(**final: Any) -> Any:
            # Unedited arguments go to the tool as the model wrote them: agentops stores them
            # as JSON values, which need not keep the order of their keys.
            return await tool.on_invoke_tool(ctx, raw if final == args else json.dumps(final))

        outcome = await handle.call_tool(
            tool.name,
            args,
            run,
            args_schema=tool.params_json_schema or None,
            call_id=ctx.tool_call_id,
            error_when=error_when,
        )
        if isinstance(outcome, Rejected):
            return str(outcome)
        return outcome

    return dataclasses.replace(tool, on_invoke_tool=invoke)


def to_chat_messages(items: list[TResponseInputItem]) -> list[dict[str, Any]]:
    """Agents SDK input items as OpenAI chat messages with only the keys agentops keeps."""
    messages = []
    for message in Converter.items_to_messages(items):
        kept = {k: v for k, v in dict(message).items() if k in MESSAGE_KEYS}
        if kept.get("role") in ("system", "developer", "user", "assistant", "tool"):
            messages.append(json.loads(json.dumps(kept, default=str)))
    return messages


# The model settings reported as the model's parameters: the sampling and output ones, never
# extra headers, query or body (which may hold credentials) or metadata.
MODEL_PARAMETERS = (
    "temperature",
    "top_p",
    "frequency_penalty",
    "presence_penalty",
    "max_tokens",
    "tool_choice",
    "parallel_tool_calls",
    "truncation",
    "reasoning",
    "verbosity",
    "top_logprobs",
)


def model_parameters(agent: Agent[Any]) -> dict[str, Any]:
    """The ``MODEL_PARAMETERS`` ``agent``'s model settings set (None ones left out), as
    JSON values."""
    settings = agent.model_settings.to_json_dict()
    chosen = {name: settings[name] for name in MODEL_PARAMETERS if settings.get(name) is not None}
    parameters: dict[str, Any] = json.loads(json.dumps(chosen, default=str))
    return parameters


class AgentOpsHooks(RunHooks[Any]):
    """Run hooks recording each model turn of a run in agentops: the input items new since the
    last turn (the user's message, tool outputs) and the model's answer, with ``usage``
    (``model``, ``input_tokens``, ``output_tokens`` in tokens, ``latency_ms`` in ms and
    ``cost_usd`` in USD from ``price(model, input_tokens, output_tokens)`` when given), and
    what drove the turn: the agent's name (``Agent.name``) and ``agent_version``, the system
    prompt it was sent (labelled ``prompt_name`` and ``prompt_version`` when given) and its
    model settings (``MODEL_PARAMETERS``). Each of those is sent when it differs from what
    the last turn sent (a handoff to another agent changes them)."""

    def __init__(
        self,
        handle: AsyncRunHandle,
        *,
        price: Callable[[str, int, int], float] | None = None,
        agent_version: str = "",
        prompt_name: str = "",
        prompt_version: str = "",
    ) -> None:
        self.handle, self.price = handle, price
        self.agent_version = agent_version
        self.prompt_name, self.prompt_version = prompt_name, prompt_version
        self._seen = 0
        self._pending: list[TResponseInputItem] = []
        self._started = 0.0
        self._identity: dict[str, Any] = {}
        self._sent: dict[str, Any] = {}

    def _identity_of(self, agent: Agent[Any], system_prompt: str | None) -> dict[str, Any]:
        identity: dict[str, Any] = {
            "agent_name": agent.name,
            "model_parameters": model_parameters(agent),
        }
        if self.agent_version:
            identity["agent_version"] = self.agent_version
        if system_prompt:
            identity["prompt"] = {
                "content": system_prompt,
                "name": self.prompt_name,
                "version": self.prompt_version,
            }
        return identity

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        self._pending = list(input_items[self._seen :])
        self._seen = len(input_items)
        self._identity = self._identity_of(agent, system_prompt)
        self._started = time.monotonic()

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        latency_ms = int((time.monotonic() - self._started) * 1000)
        answer = response.to_input_items()
        self._seen += len(answer)
        model = str(getattr(agent.model, "model", agent.model) or "")
        usage: dict[str, Any] = {
            "model": model or "unknown",
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
            "latency_ms": latency_ms,
        }
        if self.price is not None:
            usage["cost_usd"] = self.price(model, usage["input_tokens"], usage["output_tokens"])
        messages = to_chat_messages([*self._pending, *answer])
        if messages:
            changed = {k: v for k, v in self._identity.items() if self._sent.get(k) != v}
            await self.handle.record_turn(messages, usage, **changed)
            self._sent.update(changed)


class AgentOpsSession:
    """The OpenAI Agents SDK's ``Session`` protocol (``agents.memory.session.Session``) on an
    agentops session: ``Runner.run(agent, input, session=AgentOpsSession(client,
    session_id))`` reads the conversation from agentops before the turn and adds the turn's
    items after it, so any process that names the session goes on with it.

    ``client`` is an ``AsyncClient``; ``session_id`` the session's id (``create_session``).
    Items are stored verbatim (Responses-API input items, with or without a role).
    ``get_items`` returns the session's active context: items not popped or cleared, and in
    place of compacted items the compaction's summary (a ``system`` message). Nothing is
    destroyed on the server: ``pop_item`` and ``clear_session`` mark items removed, audited.
    ``compact`` replaces older items by a summary (the server's summarizer, or yours).
    """

    session_settings: Any = None

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self.client, self.session_id = client, session_id

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The active context's items, oldest first; with ``limit``, the latest ``limit``."""
        context = await self.client.session_context(self.session_id)
        items: list[TResponseInputItem] = context["messages"]
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add ``items`` at the end of the session's conversation (nothing when empty)."""
        if items:
            await self.client.add_session_items(
                self.session_id, [json.loads(json.dumps(item, default=str)) for item in items]
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the latest item out of the active context and return it (None: empty)."""
        item = await self.client.pop_session_item(self.session_id)
        return cast("TResponseInputItem | None", item)

    async def clear_session(self) -> None:
        """Empty the active context (the items stay on the server, marked removed)."""
        await self.client.clear_session(self.session_id)

    async def compact(
        self, summary: str | None = None, *, first: int | None = None, last: int | None = None
    ) -> dict[str, Any]:
        """Replace items ``first`` to ``last`` (session positions) by ``summary``, or, with
        no arguments, let the server's summarizer choose: see
        ``AsyncClient.compact_session``."""
        return await self.client.compact_session(self.session_id, summary, first=first, last=last)


__all__ = [
    "AgentOpsHooks",
    "AgentOpsSession",
    "current_step",
    "govern",
    "model_parameters",
    "to_chat_messages",
]
