"""Replay τ-bench airline conversations as agents governed by agentops.

Each conversation becomes a client run (``metadata``: ``{"source": "tau-bench-airline",
"task_id", "trial"}``) driven by an unmodified OpenAI Agents SDK agent whose model is the
replay model server (``model_server``) and whose 14 tools really run on a fresh copy of the
airline data in PostgreSQL (``tools``), each call a client step of the run: classified, held
for a reviewer when risky, recorded once in the ledger. The recorded user messages are fed
turn by turn; every tool output is compared with the recorded one.

    python -m examples.airline.replay FILE [--limit N] --url BASE --token TOKEN
        [--reviewer-token TOKEN] [--model-url URL] [--session NAME] [--concurrency N]

Without ``--reviewer-token`` the approvals wait for someone else (the inbox). Running again
with the same ``--session`` resumes: finished runs are skipped, the others replay from their
start, getting the steps and turns already on record back instead of repeating them.

Progress goes to stderr as it happens, a line each (a run started, a tool called, and
answered once its gate let it run, a run finished); the report goes to stdout at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentops_client import AsyncClient, AsyncRunHandle, current_step
from agentops_client.openai_agents import AgentOpsHooks, govern
from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    RunContextWrapper,
    Runner,
    Tool,
)
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from examples.airline import model_server, tools
from examples.airline.store import DEFAULT_DATA_DIR, DEFAULT_DSN, Store

SOURCE = "tau-bench-airline"
logger = logging.getLogger(__name__)
# No traces: they would go to OpenAI's tracing service, which a replay has no key for.
RUN_CONFIG = RunConfig(tracing_disabled=True)


@dataclass
class Conversation:
    """One replayed conversation: its run, the tool calls it made and how many differ from
    the recording (``mismatches``: (step index, tool, got, recorded))."""

    task_id: Any
    trial: Any
    run_id: str = ""
    status: str = ""
    calls: int = 0
    mismatches: list[tuple[int, str, str, str]] = field(default_factory=list)


@dataclass
class Report:
    """What a replay did: its ``conversations``, ``seconds`` of wall time, and the tool
    calls per second over it."""

    conversations: list[Conversation]
    seconds: float

    @property
    def calls(self) -> int:
        return sum(c.calls for c in self.conversations)

    @property
    def mismatches(self) -> int:
        return sum(len(c.mismatches) for c in self.conversations)

    def summary(self) -> str:
        rate = self.calls / self.seconds if self.seconds else 0.0
        ended: dict[str, int] = {}
        for c in self.conversations:
            ended[c.status] = ended.get(c.status, 0) + 1
        return (
            f"{len(self.conversations)} conversations, {self.calls} tool calls, "
            f"{self.mismatches} differing from the recording, runs {ended}; "
            f"{self.seconds:.1f} s, {rate:.1f} steps/s"
        )


def print_report(report: Report, unit: str) -> int:
    """Print each output that differs from the recording (``unit``: what its index counts,
    step or call) and the summary; returns the exit status (0: none differs)."""
    for conversation in report.conversations:
        for index, tool, got, recorded in conversation.mismatches:
            print(
                f"task {conversation.task_id}/{conversation.trial} {unit} {index} {tool}: "
                f"got {got!r}, recorded {recorded!r}"
            )
    print(report.summary())
    return 0 if report.mismatches == 0 else 1


def recorded_calls(traj: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """The recorded tool calls of a conversation in order: (tool, arguments, output). Each
    output is the tool message right after its call (ids are not unique in the data)."""
    found = []
    for i, message in enumerate(traj):
        for call in message.get("tool_calls") or []:
            output = next(
                (m["content"] for m in traj[i + 1 :] if m.get("tool_call_id") == call["id"]), ""
            )
            found.append(
                (call["function"]["name"], json.loads(call["function"]["arguments"]), output)
            )
    return found


def user_turns(traj: list[dict[str, Any]]) -> list[str]:
    """The user messages of a recorded conversation that the agent answered, in order (the
    user's last message, ``###STOP###``, gets no answer and is left out)."""
    return [
        message["content"]
        for i, message in enumerate(traj)
        if message["role"] == "user" and any(m["role"] == "assistant" for m in traj[i + 1 : i + 2])
    ]


def same_output(tool: str, got: Any, recorded: str) -> bool:
    """Whether a tool's output equals the recorded one; ``get_user_details`` is compared
    without ``address`` (the recordings predate the data files' addresses)."""
    if tool == "get_user_details" and isinstance(got, str) and got.startswith("{"):
        try:
            mine, theirs = json.loads(got), json.loads(recorded)
        except ValueError:
            return False
        if isinstance(theirs, dict):
            mine.pop("address", None)
            theirs.pop("address", None)
            return bool(mine == theirs)
    return got == recorded


def airline_tools(store: Store, world: str, specs: list[dict[str, Any]]) -> list[FunctionTool]:
    """The airline tools as Agents SDK function tools acting on ``world``; each runs under the
    idempotency key of the agentops step it runs for."""

    def make(name: str) -> Callable[[ToolContext[Any], str], Any]:
        async def invoke(ctx: ToolContext[Any], raw: str) -> str:
            step = current_step()
            key = step.idempotency_key if step else f"local:{uuid.uuid4()}"
            args = json.loads(raw or "{}")
            try:
                return await asyncio.to_thread(
                    tools.call, store, world, name, args, idempotency_key=key
                )
            except (TypeError, ValueError) as exc:
                return f"Error: {exc}"

        return invoke

    return [
        FunctionTool(
            name=spec["function"]["name"],
            description=spec["function"].get("description", ""),
            params_json_schema=spec["function"]["parameters"],
            on_invoke_tool=make(spec["function"]["name"]),
            strict_json_schema=False,
        )
        for spec in specs
    ]


def price(model: str, input_tokens: int, output_tokens: int) -> float:
    """The replay server's synthetic price (``model_server.cost_usd``), USD."""
    return model_server.cost_usd(input_tokens, output_tokens)


class ProgressHooks(AgentOpsHooks):
    """``AgentOpsHooks`` that also log each tool call of conversation ``label`` (``task 3/0``)
    as it is asked for and as it is answered: a call with no answer yet waits at its gate."""

    def __init__(self, handle: AsyncRunHandle, label: str) -> None:
        super().__init__(handle, price=price)
        self.label = label

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        logger.info("%s: calls %s", self.label, tool.name)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        logger.info("%s: %s answered %.60r", self.label, tool.name, result)


async def replay_one(
    client: AsyncClient,
    conversation: dict[str, Any],
    *,
    store: Store,
    model_url: str,
    session: str,
    specs: list[dict[str, Any]],
) -> Conversation:
    """Replay one conversation as a client run (resuming it when ``session`` already ran
    it) and compare its tool outputs with the recording."""
    task_id, trial, traj = conversation["task_id"], conversation["trial"], conversation["traj"]
    found = Conversation(task_id, trial)
    handle: AsyncRunHandle = await client.start_run(
        f"τ-bench airline task {task_id}, trial {trial}",
        metadata={"source": SOURCE, "task_id": task_id, "trial": trial, "session": session},
        idempotency_key=f"{session}:{SOURCE}:{task_id}:{trial}",
    )
    found.run_id = handle.run_id
    label = f"task {task_id}/{trial}"
    run = await client.get_run(handle.run_id)
    logger.info("%s: run %s %s", label, handle.run_id, run.status)
    if not run.finished:
        world = f"{session}:{task_id}:{trial}"
        await asyncio.to_thread(store.create_world, world)
        openai = AsyncOpenAI(base_url=f"{model_url}/v1", api_key="replay", max_retries=5)
        agent = Agent(
            name="airline agent",
            instructions=traj[0]["content"] if traj and traj[0]["role"] == "system" else None,
            model=OpenAIChatCompletionsModel(
                model=model_server.model_name(task_id, trial), openai_client=openai
            ),
            model_settings=ModelSettings(parallel_tool_calls=False),
            tools=list(airline_tools(store, world, specs)),
        )
        governed = govern(agent, handle, error_when=tools.is_error)
        hooks = ProgressHooks(handle, label)
        history: list[Any] = []
        for text in user_turns(traj):
            history.append({"role": "user", "content": text})
            result = await Runner.run(
                governed, history, hooks=hooks, max_turns=60, run_config=RUN_CONFIG
            )
            history = result.to_input_list()
        await handle.complete()
        run = await handle.wait_finished(timeout=600)
    found.status = run.status
    steps = sorted(run.steps, key=lambda s: s.index)
    for step, (tool, _args, output) in zip(steps, recorded_calls(traj), strict=False):
        found.calls += 1
        if step.tool != tool or not same_output(tool, step.result, output):
            found.mismatches.append((step.index, step.tool, str(step.result)[:200], output[:200]))
    if len(steps) != len(recorded_calls(traj)):
        found.mismatches.append((-1, "(count)", str(len(steps)), str(len(recorded_calls(traj)))))
    logger.info(
        "%s: run %s %s, %d tool calls, %d differing from the recording",
        label,
        found.run_id,
        found.status,
        found.calls,
        len(found.mismatches),
    )
    return found


async def approve_pending(reviewer: AsyncClient, runs: set[str], stop: asyncio.Event) -> int:
    """Approve, as the reviewer, every pending approval of ``runs`` until ``stop``; returns
    how many it approved."""
    approved = 0
    while not stop.is_set():
        for approval in await reviewer.pending_approvals():
            if approval.run_id in runs:
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
    reviewer_token: str = "",
    model_url: str = "",
    limit: int | None = None,
    session: str = "",
    concurrency: int = 8,
    dsn: str = DEFAULT_DSN,
    data_dir: Path = DEFAULT_DATA_DIR,
) -> Report:
    """Replay the conversations of ``path`` (τ-bench trajectories format) against the
    agentops at ``url`` as the user of ``token``; see the module docstring."""
    conversations = json.loads(Path(path).read_text())[:limit]
    session = session or uuid.uuid4().hex[:8]
    logger.info("replaying %d conversations on %s (session %s)", len(conversations), url, session)
    server = None
    if not model_url:
        server, model_url = model_server.spawn(Path(path))
    store = await asyncio.to_thread(Store, dsn, data_dir, max(2, concurrency))
    specs = tools.tool_specs(data_dir)
    client = AsyncClient(url, token)
    reviewer = AsyncClient(url, reviewer_token) if reviewer_token else None
    runs: set[str] = set()
    stop = asyncio.Event()
    gate = asyncio.Semaphore(concurrency)
    started = time.monotonic()

    async def one(conversation: dict[str, Any]) -> Conversation:
        async with gate:
            found = await replay_one(
                client,
                conversation,
                store=store,
                model_url=model_url,
                session=session,
                specs=specs,
            )
            runs.add(found.run_id)
            return found

    # The reviewer approves the runs' calls as they come (their ids are known once created).
    approver = None
    if reviewer is not None:
        original = client.start_run

        async def tracked(goal: str, **options: Any) -> AsyncRunHandle:
            handle = await original(goal, **options)
            runs.add(handle.run_id)
            return handle

        client.start_run = tracked  # type: ignore[method-assign]
        approver = asyncio.create_task(approve_pending(reviewer, runs, stop))
    try:
        results = await asyncio.gather(*(one(c) for c in conversations))
    finally:
        stop.set()
        if approver is not None:
            await approver
        await client.aclose()
        if reviewer is not None:
            await reviewer.aclose()
        if server is not None:
            server.terminate()
            server.wait()
        store.close()
    return Report(list(results), time.monotonic() - started)


def command_line(description: str) -> argparse.ArgumentParser:
    """The options the airline replays share (the conversations file, agentops' URL and
    tokens, the replay model server, resuming, concurrency, the airline data), for a replay's
    ``main`` to add its own to."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("file", type=Path, help="conversations in τ-bench's trajectories format")
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N")
    parser.add_argument(
        "--url", required=True, help="agentops base URL, e.g. http://127.0.0.1:8000"
    )
    parser.add_argument("--token", required=True, help="API token of the client app's user")
    parser.add_argument("--reviewer-token", default="", help="a reviewer's token: approve all")
    parser.add_argument("--model-url", default="", help="a running replay model server")
    parser.add_argument("--session", default="", help="resume the replay of this name")
    parser.add_argument("--concurrency", type=int, default=8, help="conversations at once")
    parser.add_argument("--airline-db", default=DEFAULT_DSN, help="PostgreSQL for the airline")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    return parser


def show_progress(progress: logging.Logger) -> None:
    """The progress lines of a replay's logger ``progress`` on stderr as they happen (a
    handler flushes each record): not the libraries' own INFO logs (httpx logs every
    request)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    progress.addHandler(handler)
    progress.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    args = command_line(__doc__.splitlines()[0]).parse_args(argv)
    show_progress(logger)
    report = asyncio.run(
        replay(
            args.file,
            url=args.url,
            token=args.token,
            reviewer_token=args.reviewer_token,
            model_url=args.model_url,
            limit=args.limit,
            session=args.session,
            concurrency=args.concurrency,
            dsn=args.airline_db,
            data_dir=args.data_dir,
        )
    )
    return print_report(report, "step")


if __name__ == "__main__":
    sys.exit(main())
