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
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, RunHooks
from agents.items import ModelResponse, TResponseInputItem
from agents.models.chatcmpl_converter import Converter
from agents.tool_context import ToolContext

from agentops_client.aio import AsyncRunHandle, current_step
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


class AgentOpsHooks(RunHooks[Any]):
    """Run hooks recording each model turn of a run in agentops: the input items new since the
    last turn (the user's message, tool outputs) and the model's answer, with ``usage``
    (``model``, ``input_tokens``, ``output_tokens`` in tokens, ``latency_ms`` in ms and
    ``cost_usd`` in USD from ``price(model, input_tokens, output_tokens)`` when given)."""

    def __init__(
        self,
        handle: AsyncRunHandle,
        *,
        price: Callable[[str, int, int], float] | None = None,
    ) -> None:
        self.handle, self.price = handle, price
        self._seen = 0
        self._pending: list[TResponseInputItem] = []
        self._started = 0.0

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        self._pending = list(input_items[self._seen :])
        self._seen = len(input_items)
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
            await self.handle.record_turn(messages, usage)


__all__ = ["AgentOpsHooks", "current_step", "govern", "to_chat_messages"]
