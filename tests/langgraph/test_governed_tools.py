"""A LangGraph agent's tools under agentops (``governed_tool_node``) against a live server
(daphne, a Celery worker): a reviewer's rejection reaches the model as the tool's message with
the reason, an approval with edited arguments runs the tool with them, every model turn is
recorded with its tokens (``AgentOpsCallbackHandler``), and a graph resumed after a crash
mid-node gets the recorded result of a call whose effect is on record instead of repeating
it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from agentops_client import AsyncClient, Client
from agentops_client.langgraph import (
    AgentOpsCallbackHandler,
    AgentOpsSaver,
    governed_tool_node,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

from runs.models import ModelCall, Run, StepStatus, ToolCall
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

USAGE = {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}


def asks(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    tool_calls = [{"name": n, "args": a, "id": f"call-{i}"} for i, (n, a) in enumerate(calls)]
    return AIMessage(content="", tool_calls=tool_calls, usage_metadata=USAGE)


@pytest.fixture
def clients(worker, asgi_server, seeded):
    agent = make_user("graph-agent", "operator")
    reviewer = make_user("graph-reviewer", "reviewer")
    made = [
        Client(asgi_server.url, make_token(user), poll_interval=60) for user in (agent, reviewer)
    ]
    yield made
    for client in made:
        client.close()


def decide_in_turn(reviewer: Client, decisions: list[Any]) -> threading.Thread:
    """Decide the pending approvals one after the other, as they come."""

    def loop() -> None:
        deadline = time.monotonic() + 60
        while decisions and time.monotonic() < deadline:
            pending = reviewer.pending_approvals()
            if pending:
                decisions.pop(0)(pending[0])
            else:
                time.sleep(0.1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def agent_graph(model: Any, tools_node: Any, saver: Any) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", tools_node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


def test_a_rejection_reaches_the_model_and_an_edited_approval_runs_as_edited(clients):
    agent, reviewer = clients
    run = agent.start_run("refund the customer")
    refunds: list[int] = []

    @tool
    def issue_refund(amount: int) -> dict[str, int]:
        """Refund ``amount`` dollars."""  # "issue_*": no rule, high risk
        refunds.append(amount)
        return {"refunded": amount}

    model = GenericFakeChatModel(
        messages=iter(
            [
                asks(("issue_refund", {"amount": 600})),
                asks(("issue_refund", {"amount": 100})),
                AIMessage(content="Refunded $90.", usage_metadata=USAGE),
            ]
        )
    )
    graph = agent_graph(model, governed_tool_node([issue_refund], run), AgentOpsSaver(agent))
    decide_in_turn(
        reviewer,
        [
            lambda a: reviewer.reject(a.id, "over $100 needs a manager"),
            lambda a: reviewer.approve(a.id, "90 is the policy", args={"amount": 90}),
        ],
    )
    config = {
        "configurable": {"thread_id": "refund-1"},
        "callbacks": [AgentOpsCallbackHandler(run)],
    }
    final = graph.invoke({"messages": [("user", "Refund my $600 ticket")]}, config)
    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert [(m.content, m.status) for m in tool_messages] == [
        ("Rejected by graph-reviewer: over $100 needs a manager", "error"),
        ('{"refunded": 90}', "success"),
    ]
    assert refunds == [90]
    assert final["messages"][-1].content == "Refunded $90."
    steps = Run.objects.get(pk=run.run_id).steps.order_by("index")
    assert [(s.tool, s.status, s.args) for s in steps] == [
        ("issue_refund", StepStatus.REJECTED, {"amount": 600}),
        ("issue_refund", StepStatus.SUCCEEDED, {"amount": 90}),
    ]
    calls = ModelCall.objects.filter(run_id=run.run_id)
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [(12, 3)] * 3
    # The model's second turn was sent the rejection, which the run's conversation holds.
    tool_turns = [m for m in Run.objects.get(pk=run.run_id).messages.all() if m.role == "tool"]
    assert "over $100 needs a manager" in str(tool_turns[0].content)


class Crash(Exception):
    """The process dying after the tool's effect was recorded, before the node's writes."""


def test_a_graph_resumed_after_a_crash_mid_node_does_not_repeat_the_call(clients):
    agent, reviewer = clients
    run = agent.start_run("refund the customer")
    refunds: list[int] = []

    @tool
    def issue_refund(amount: int) -> dict[str, int]:
        """Refund ``amount`` dollars."""
        refunds.append(amount)
        return {"refunded": amount}

    tools = governed_tool_node([issue_refund], run)
    crashes = [Crash()]

    def tools_then_crash(state: MessagesState, config: RunnableConfig) -> Any:
        done = tools.invoke(state, config)
        if crashes:
            raise crashes.pop()
        return done

    model = GenericFakeChatModel(
        messages=iter([asks(("issue_refund", {"amount": 50})), AIMessage(content="Done.")])
    )
    graph = agent_graph(model, tools_then_crash, AgentOpsSaver(agent))
    decide_in_turn(reviewer, [lambda a: reviewer.approve(a.id, "ok")])
    config: RunnableConfig = {"configurable": {"thread_id": "refund-2"}}
    with pytest.raises(Crash):
        graph.invoke(
            {"messages": [("user", "Refund $50")]},
            {**config, "callbacks": [AgentOpsCallbackHandler(run)]},
        )
    assert refunds == [50]
    # Resumed from its last checkpoint (before the tool node) by a new process's objects.
    resumed = agent_graph(model, tools_then_crash, AgentOpsSaver(agent))
    final = resumed.invoke(None, {**config, "callbacks": [AgentOpsCallbackHandler(run)]})
    assert final["messages"][-1].content == "Done."
    assert refunds == [50]
    assert [m.content for m in final["messages"] if isinstance(m, ToolMessage)] == [
        '{"refunded": 50}'
    ]
    assert ToolCall.objects.filter(run_id=run.run_id).count() == 1
    assert Run.objects.get(pk=run.run_id).steps.count() == 1
    # The new handler recorded only what was new: the tool's result and the last answer.
    conversation = Run.objects.get(pk=run.run_id).messages.order_by("position")
    assert [(m.role, m.content) for m in conversation] == [
        ("user", "Refund $50"),
        ("assistant", ""),
        ("tool", '{"refunded": 50}'),
        ("assistant", "Done."),
    ]


def test_an_async_run_handle_governs_ainvoke_and_refuses_a_sync_invoke(clients, asgi_server):
    agent, reviewer = clients
    refunds: list[int] = []

    @tool
    def issue_refund(amount: int) -> dict[str, int]:
        """Refund ``amount`` dollars."""
        refunds.append(amount)
        return {"refunded": amount}

    def script() -> GenericFakeChatModel:
        return GenericFakeChatModel(
            messages=iter([asks(("issue_refund", {"amount": 30})), AIMessage(content="Done.")])
        )

    decide_in_turn(reviewer, [lambda a: reviewer.approve(a.id, "ok")])

    token = make_token(make_user("async-agent", "operator"))

    async def turn() -> tuple[Any, str]:
        async with AsyncClient(asgi_server.url, token, poll_interval=60) as client:
            run = await client.start_run("refund the customer")
            node = governed_tool_node([issue_refund], run)
            graph = agent_graph(script(), node, AgentOpsSaver(agent))
            final = await graph.ainvoke(
                {"messages": [("user", "Refund $30")]}, {"configurable": {"thread_id": "a-1"}}
            )
            sync_graph = agent_graph(script(), node, AgentOpsSaver(agent))
            with pytest.raises(TypeError, match="ainvoke"):
                sync_graph.invoke(
                    {"messages": [("user", "Refund $30")]}, {"configurable": {"thread_id": "a-2"}}
                )
            return final, run.run_id

    final, run_id = asyncio.run(turn())
    assert final["messages"][-1].content == "Done."
    assert refunds == [30]
    steps = Run.objects.get(pk=run_id).steps.all()
    assert [(s.tool, s.status, s.args) for s in steps] == [
        ("issue_refund", StepStatus.SUCCEEDED, {"amount": 30})
    ]


def test_unedited_arguments_reach_the_tool_in_the_models_key_order(clients):
    agent, reviewer = clients
    run = agent.start_run("book a seat")

    @tool
    def book_seat(passenger: dict[str, str]) -> str:
        """Book a seat for ``passenger``; the booking echoes the passenger as given."""
        return json.dumps(passenger)

    # PostgreSQL's jsonb keeps keys shortest first: dob, last_name, first_name.
    passenger = {"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}
    model = GenericFakeChatModel(
        messages=iter([asks(("book_seat", {"passenger": passenger})), AIMessage(content="ok")])
    )
    graph = agent_graph(model, governed_tool_node([book_seat], run), AgentOpsSaver(agent))
    decide_in_turn(reviewer, [lambda a: reviewer.approve(a.id, "ok")])
    final = graph.invoke(
        {"messages": [("user", "Book me")]}, {"configurable": {"thread_id": "seat-1"}}
    )
    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.content == json.dumps(passenger)
    assert list(Run.objects.get(pk=run.run_id).steps.get().args["passenger"]) != list(passenger)
