"""Replay τ-bench airline conversations with agents that reach the airline tools only through
the agentops MCP gateway.

Each conversation is an unmodified OpenAI Agents SDK agent (its model the replay model server,
``model_server``) whose only tools are those of one MCP server: ``/mcp/UPSTREAM/`` on agentops,
in front of the airline MCP server (``mcp_server``, registered as that upstream). The agent
knows nothing of agentops: the gateway makes its session a run, each call a step, holds the
writes for a reviewer, and forwards each call once; the airline server gives each session a
fresh world of its own. Every tool output the agent receives is compared with the recorded one.

    python -m examples.airline.mcp_replay FILE --url BASE --token TOKEN
        [--upstream airline] [--reviewer-token TOKEN] [--limit N] [--concurrency N]

With ``--reviewer-token`` a reviewer approves every pending call of the gateway's sessions to
that upstream as it comes; without it the calls wait in the inbox.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from agentops_client import AsyncClient
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunHooks, Runner
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

from examples.airline import model_server
from examples.airline.replay import (
    RUN_CONFIG,
    Conversation,
    Report,
    print_report,
    recorded_calls,
    same_output,
    user_turns,
)

# Seconds an MCP call may take, approval waits included.
CALL_TIMEOUT = 600.0


class _Outputs(RunHooks[Any]):
    """Keeps every tool output the agent received, in order: (tool, output)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        self.seen.append((tool.name, _text(result)))


def _text(result: object) -> str:
    """The text of an MCP tool's output as the Agents SDK hands it over: a text content item
    (``{"type": "text", "text": ...}``), a list of them, or already a string."""
    if isinstance(result, dict) and result.get("type") == "text":
        return str(result.get("text", ""))
    if isinstance(result, list):
        return "".join(_text(item) for item in result)
    return str(result)


async def replay_one(
    conversation: dict[str, Any], *, mcp_url: str, token: str, model_url: str
) -> Conversation:
    """Replay one conversation through the gateway at ``mcp_url`` (one MCP session) and
    compare the outputs the agent got with the recording."""
    task_id, trial, traj = conversation["task_id"], conversation["trial"], conversation["traj"]
    found = Conversation(task_id, trial)
    server = MCPServerStreamableHttp(
        params={
            "url": mcp_url,
            "headers": {"Authorization": f"Bearer {token}"},
            "timeout": 30,
            "sse_read_timeout": CALL_TIMEOUT,
        },
        cache_tools_list=True,
        name=f"airline {task_id}/{trial}",
        client_session_timeout_seconds=CALL_TIMEOUT,
    )
    outputs = _Outputs()
    async with server:
        openai = AsyncOpenAI(base_url=f"{model_url}/v1", api_key="replay", max_retries=5)
        agent = Agent(
            name="airline agent",
            instructions=traj[0]["content"] if traj and traj[0]["role"] == "system" else None,
            model=OpenAIChatCompletionsModel(
                model=model_server.model_name(task_id, trial), openai_client=openai
            ),
            model_settings=ModelSettings(parallel_tool_calls=False),
            mcp_servers=[server],
        )
        history: list[Any] = []
        for text in user_turns(traj):
            history.append({"role": "user", "content": text})
            result = await Runner.run(
                agent, history, hooks=outputs, max_turns=60, run_config=RUN_CONFIG
            )
            history = result.to_input_list()
    recorded = recorded_calls(traj)
    found.status = "replayed"
    for index, ((tool, got), (want_tool, _args, output)) in enumerate(
        zip(outputs.seen, recorded, strict=False)
    ):
        found.calls += 1
        if tool != want_tool or not same_output(tool, got, output):
            at = next((i for i, (a, b) in enumerate(zip(got, output, strict=False)) if a != b), 0)
            start = max(0, at - 60)
            found.mismatches.append((index, tool, got[start : at + 140], output[start : at + 140]))
    if len(outputs.seen) != len(recorded):
        found.mismatches.append((-1, "(count)", str(len(outputs.seen)), str(len(recorded))))
    return found


async def approve_gateway_calls(reviewer: AsyncClient, upstream: str, stop: asyncio.Event) -> int:
    """Approve, as the reviewer, every pending call of the gateway's sessions to ``upstream``
    until ``stop``; returns how many it approved."""
    approved = 0
    through: dict[str, bool] = {}
    while not stop.is_set():
        for approval in await reviewer.pending_approvals():
            if approval.run_id not in through:
                run = (await reviewer.get_run(approval.run_id)).raw
                gateway = (run.get("metadata") or {}).get("mcp") or {}
                through[approval.run_id] = gateway.get("upstream") == upstream
            if through[approval.run_id]:
                try:
                    await reviewer.approve(approval.id, comment="replay: as recorded")
                    approved += 1
                except Exception as exc:
                    print(f"approval {approval.id}: {exc}", file=sys.stderr)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)
    return approved


async def replay(
    path: Path,
    *,
    url: str,
    token: str,
    upstream: str = "airline",
    reviewer_token: str = "",
    model_url: str = "",
    limit: int | None = None,
    concurrency: int = 8,
) -> Report:
    """Replay the conversations of ``path`` (τ-bench trajectories format) through the gateway
    of the agentops at ``url`` as the user of ``token``; see the module docstring."""
    conversations = json.loads(Path(path).read_text())[:limit]
    server = None
    if not model_url:
        server, model_url = model_server.spawn(Path(path))
    mcp_url = f"{url.rstrip('/')}/mcp/{upstream}/"
    reviewer = AsyncClient(url, reviewer_token) if reviewer_token else None
    stop = asyncio.Event()
    gate = asyncio.Semaphore(concurrency)
    started = time.monotonic()

    async def one(conversation: dict[str, Any]) -> Conversation:
        async with gate:
            return await replay_one(conversation, mcp_url=mcp_url, token=token, model_url=model_url)

    approver = None
    if reviewer is not None:
        approver = asyncio.create_task(approve_gateway_calls(reviewer, upstream, stop))
    try:
        results = await asyncio.gather(*(one(c) for c in conversations))
    finally:
        stop.set()
        if approver is not None:
            await approver
        if reviewer is not None:
            await reviewer.aclose()
        if server is not None:
            server.terminate()
            server.wait()
    return Report(list(results), time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="conversations in τ-bench's trajectories format")
    parser.add_argument("--url", required=True, help="agentops base URL")
    parser.add_argument("--token", required=True, help="API token of the agent's user")
    parser.add_argument("--upstream", default="airline", help="the gateway's upstream name")
    parser.add_argument("--reviewer-token", default="", help="a reviewer's token: approve all")
    parser.add_argument("--model-url", default="", help="a running replay model server")
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N")
    parser.add_argument("--concurrency", type=int, default=8, help="conversations at once")
    args = parser.parse_args(argv)
    report = asyncio.run(
        replay(
            args.file,
            url=args.url,
            token=args.token,
            upstream=args.upstream,
            reviewer_token=args.reviewer_token,
            model_url=args.model_url,
            limit=args.limit,
            concurrency=args.concurrency,
        )
    )
    return print_report(report, "call")


if __name__ == "__main__":
    sys.exit(main())
