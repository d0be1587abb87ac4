"""Replay τ-bench airline conversations with a LangGraph agent governed by agentops.

Each conversation is one LangGraph graph (``build_graph``): a model node, LangChain's
``ChatOpenAI`` on the replay model server (``model_server``), and a tool node,
``governed_tool_node`` over the 14 airline tools, which really run on a fresh copy of the
airline data in PostgreSQL (``tools``): every call a client step of the conversation's run,
classified, held for a reviewer when risky, recorded once in the ledger. ``AgentOpsSaver``
keeps the graph's thread (``<session>:langgraph:<task>:<trial>``, also the name of its
airline world) and ``AgentOpsCallbackHandler`` records the model turns with their tokens.
The recorded user messages are fed turn by turn; the tool messages the model got are
compared with the recorded outputs.

    python -m examples.airline.langgraph_replay FILE --url BASE --token TOKEN
        [--limit N] [--only TASK/TRIAL ...] [--reviewer-token TOKEN] [--model-url URL]
        [--session NAME] [--concurrency N]

Without ``--reviewer-token`` the approvals wait for someone else (the inbox). Running again
with the same ``--session`` resumes each conversation from its thread's last checkpoint: a
node a crash interrupted runs again, and its tool calls whose effect is on record get their
recorded result instead of acting twice.

Progress goes to stderr as it happens; the report goes to stdout at the end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentops_client import AsyncClient, Client, current_step
from agentops_client.langgraph import (
    AgentOpsCallbackHandler,
    AgentOpsSaver,
    governed_tool_node,
)
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import StructuredTool, ToolException
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import SecretStr

from examples.airline import model_server, tools
from examples.airline.replay import (
    SOURCE,
    Conversation,
    Report,
    approve_pending,
    command_line,
    print_report,
    recorded_calls,
    same_output,
    show_progress,
    user_turns,
)
from examples.airline.store import DEFAULT_DATA_DIR, DEFAULT_DSN, Store

FRAMEWORK = "langgraph"
# Graph steps one user turn may take (a model turn and a tool turn each): as the Agents SDK
# replay's 60 turns.
RECURSION_LIMIT = 120
logger = logging.getLogger(__name__)


def thread_id(session: str, task_id: Any, trial: Any) -> str:
    """The LangGraph thread (and airline world) of a conversation in ``session``."""
    return f"{session}:{FRAMEWORK}:{task_id}:{trial}"


def airline_tools(
    store: Store, world: str, specs: list[dict[str, Any]], label: str = ""
) -> list[StructuredTool]:
    """The airline tools as LangChain tools acting on ``world``, with ``specs``' names,
    descriptions and JSON Schemas (``tools.tool_specs``). Each runs under the idempotency key
    of the agentops step it runs for, so a write made again after a crash returns its
    recorded output. A τ-bench error answer (``"Error: ..."``) is raised as a
    ``ToolException``: the model gets the text unchanged in a tool message of status
    ``error``, and agentops marks the step a tool error.

    Raises (when a tool is called):
        RuntimeError: outside a governed step (``governed_tool_node``).
    """

    def make(name: str) -> Callable[..., Awaitable[str]]:
        async def invoke(**args: Any) -> str:
            step = current_step()
            if step is None:
                raise RuntimeError(f"{name} runs only as a step of an agentops run")
            try:
                output = await asyncio.to_thread(
                    tools.call, store, world, name, args, idempotency_key=step.idempotency_key
                )
            except (TypeError, ValueError) as exc:
                output = f"Error: {exc}"
            logger.info("%s: %s answered %.60r", label, name, output)
            if tools.is_error(output):
                raise ToolException(output)
            return output

        return invoke

    return [
        StructuredTool.from_function(
            coroutine=make(spec["function"]["name"]),
            name=spec["function"]["name"],
            description=spec["function"].get("description", ""),
            args_schema=spec["function"]["parameters"],
            handle_tool_error=True,
        )
        for spec in specs
    ]


def build_graph(
    model: Runnable[Any, Any], tool_node: ToolNode, saver: AgentOpsSaver
) -> CompiledStateGraph[MessagesState, None, MessagesState, MessagesState]:
    """The agent: ``model`` answers the conversation so far (with tool calls, or a final
    message that ends the turn); ``tool_node`` runs the calls; ``saver`` checkpoints every
    step."""

    async def call_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


def chat_model(
    model_url: str, task_id: Any, trial: Any, specs: list[dict[str, Any]]
) -> Runnable[Any, Any]:
    """``ChatOpenAI`` on the replay model server, answering as the recorded agent of the
    conversation, with the airline tools bound (one call at a time, as recorded)."""
    model = ChatOpenAI(
        model=model_server.model_name(task_id, trial),
        base_url=f"{model_url}/v1",
        api_key=SecretStr("replay"),
        max_retries=5,
        # The replay server answers whole messages only.
        disable_streaming=True,
    )
    return model.bind_tools(specs, parallel_tool_calls=False)


async def replay_one(
    client: AsyncClient,
    saver: AgentOpsSaver,
    conversation: dict[str, Any],
    *,
    store: Store,
    model_url: str,
    session: str,
    specs: list[dict[str, Any]],
    runs: set[str],
) -> Conversation:
    """Replay one conversation as a client run driven by its graph (resuming its thread
    when ``session`` already ran it), add its run id to ``runs`` once created, and compare
    the tool messages the model got with the recording."""
    task_id, trial, traj = conversation["task_id"], conversation["trial"], conversation["traj"]
    found = Conversation(task_id, trial)
    thread = thread_id(session, task_id, trial)
    handle = await client.start_run(
        f"τ-bench airline task {task_id}, trial {trial} (LangGraph)",
        metadata={
            "source": SOURCE,
            "framework": FRAMEWORK,
            "task_id": task_id,
            "trial": trial,
            "session": session,
        },
        idempotency_key=f"{thread}:run",
    )
    found.run_id = handle.run_id
    runs.add(handle.run_id)
    label = f"task {task_id}/{trial}"
    await asyncio.to_thread(store.create_world, thread)
    graph = build_graph(
        chat_model(model_url, task_id, trial, specs),
        governed_tool_node(airline_tools(store, thread, specs, label), handle),
        saver,
    )
    config: RunnableConfig = {
        "configurable": {"thread_id": thread},
        "callbacks": [AgentOpsCallbackHandler(handle)],
        "recursion_limit": RECURSION_LIMIT,
    }
    state = await graph.aget_state(config)
    if state.next:
        # A crash interrupted a step: run it again from the last checkpoint.
        logger.info(
            "%s: resumes thread %s from checkpoint %s (next: %s)",
            label,
            thread,
            state.config["configurable"]["checkpoint_id"],
            ", ".join(state.next),
        )
        await graph.ainvoke(None, config)
        state = await graph.aget_state(config)
    else:
        logger.info("%s: run %s, thread %s", label, handle.run_id, thread)
    said = sum(isinstance(m, HumanMessage) for m in state.values.get("messages", []))
    system = traj[0]["content"] if traj and traj[0]["role"] == "system" else ""
    for i, text in enumerate(user_turns(traj)):
        if i < said:
            continue
        start: list[AnyMessage] = [SystemMessage(system)] if i == 0 and system else []
        await graph.ainvoke({"messages": [*start, HumanMessage(text)]}, config)
    await handle.complete()
    run = await handle.wait_finished(timeout=600)
    found.status = run.status
    final = await graph.aget_state(config)
    got = [m for m in final.values.get("messages", []) if isinstance(m, ToolMessage)]
    recorded = recorded_calls(traj)
    for index, (message, (tool, _args, output)) in enumerate(zip(got, recorded, strict=False)):
        found.calls += 1
        content = message.content if isinstance(message.content, str) else str(message.content)
        if message.name != tool or not same_output(tool, content, output):
            found.mismatches.append((index, str(message.name), content[:200], output[:200]))
    if len(got) != len(recorded) or len(run.steps) != len(recorded):
        counts = f"{len(got)} tool messages, {len(run.steps)} steps"
        found.mismatches.append((-1, "(count)", counts, str(len(recorded))))
    logger.info(
        "%s: run %s %s, %d tool calls, %d differing from the recording",
        label,
        found.run_id,
        found.status,
        found.calls,
        len(found.mismatches),
    )
    return found


def select(
    conversations: list[dict[str, Any]], limit: int | None, only: list[str]
) -> list[dict[str, Any]]:
    """The conversations named ``TASK/TRIAL`` in ``only`` (all when empty), the first
    ``limit`` of them.

    Raises:
        ValueError: ``only`` names a conversation the file does not hold.
    """
    if only:
        by_name = {f"{c['task_id']}/{c['trial']}": c for c in conversations}
        missing = [name for name in only if name not in by_name]
        if missing:
            raise ValueError(f"no such conversations: {', '.join(missing)}")
        conversations = [by_name[name] for name in only]
    return conversations[:limit]


async def replay(
    path: Path,
    *,
    url: str,
    token: str,
    reviewer_token: str = "",
    model_url: str = "",
    limit: int | None = None,
    only: list[str] | None = None,
    session: str = "",
    concurrency: int = 8,
    dsn: str = DEFAULT_DSN,
    data_dir: Path = DEFAULT_DATA_DIR,
) -> Report:
    """Replay the conversations of ``path`` (τ-bench trajectories format) as LangGraph
    graphs against the agentops at ``url`` as the user of ``token``; see the module
    docstring."""
    conversations = select(json.loads(Path(path).read_text()), limit, only or [])
    session = session or uuid.uuid4().hex[:8]
    logger.info("replaying %d conversations on %s (session %s)", len(conversations), url, session)
    server = None
    if not model_url:
        server, model_url = model_server.spawn(Path(path))
    store = await asyncio.to_thread(Store, dsn, data_dir, max(2, concurrency))
    specs = tools.tool_specs(data_dir)
    client = AsyncClient(url, token)
    # The checkpointer runs on a sync client's own loop thread (AgentOpsSaver's design).
    saver_client = Client(url, token)
    saver = AgentOpsSaver(saver_client)
    reviewer = AsyncClient(url, reviewer_token) if reviewer_token else None
    runs: set[str] = set()
    stop = asyncio.Event()
    gate = asyncio.Semaphore(concurrency)
    started = time.monotonic()

    async def one(conversation: dict[str, Any]) -> Conversation:
        async with gate:
            return await replay_one(
                client,
                saver,
                conversation,
                store=store,
                model_url=model_url,
                session=session,
                specs=specs,
                runs=runs,
            )

    approver = None
    if reviewer is not None:
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
        await asyncio.to_thread(saver_client.close)
        if server is not None:
            server.terminate()
            server.wait()
        store.close()
    return Report(list(results), time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = command_line(__doc__.splitlines()[0])
    parser.add_argument(
        "--only", action="append", default=[], metavar="TASK/TRIAL", help="replay this one"
    )
    args = parser.parse_args(argv)
    show_progress(logger)
    report = asyncio.run(
        replay(
            args.file,
            url=args.url,
            token=args.token,
            reviewer_token=args.reviewer_token,
            model_url=args.model_url,
            limit=args.limit,
            only=args.only,
            session=args.session,
            concurrency=args.concurrency,
            dsn=args.airline_db,
            data_dir=args.data_dir,
        )
    )
    return print_report(report, "call")


if __name__ == "__main__":
    sys.exit(main())
