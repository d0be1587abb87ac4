"""A LangGraph graph on ``AgentOpsSaver`` against a live agentops (daphne): its state
survives a new saver (another process's view), ``get_state_history`` walks every checkpoint
newest first, and invoking from an earlier checkpoint id forks the thread there, leaving the
first branch as it was; the async path (``ainvoke``) does the same."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from agentops_client import Client
from agentops_client.langgraph import AgentOpsSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from runs.models import AgentSession, ThreadCheckpoint
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)


class Trail(TypedDict):
    visited: Annotated[list[str], operator.add]


def build(saver: Any) -> Any:
    graph = StateGraph(Trail)
    graph.add_node("plan", lambda state: {"visited": ["plan"]})
    graph.add_node("act", lambda state: {"visited": ["act"]})
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=saver)


@pytest.fixture
def client(asgi_server, seeded):
    token = make_token(make_user("graph-agent", "operator"))
    with Client(asgi_server.url, token, websocket=False) as client:
        yield client


def test_history_and_a_fork_from_an_earlier_checkpoint(client):
    config = {"configurable": {"thread_id": "trip-1"}}
    assert build(AgentOpsSaver(client)).invoke({"visited": ["start"]}, config) == {
        "visited": ["start", "plan", "act"]
    }
    graph = build(AgentOpsSaver(client))  # a fresh saver: nothing kept in memory
    history = list(graph.get_state_history(config))
    # input, then after START, plan and act: four checkpoints, newest first, as LangGraph's
    # own in-memory saver keeps them.
    assert [(h.values, h.next) for h in history] == [
        ({"visited": ["start", "plan", "act"]}, ()),
        ({"visited": ["start", "plan"]}, ("act",)),
        ({"visited": ["start"]}, ("plan",)),
        ({"visited": []}, ("__start__",)),
    ]
    reference = build(InMemorySaver())
    reference.invoke({"visited": ["start"]}, config)
    expected = [(h.values, h.next, h.metadata) for h in reference.get_state_history(config)]
    assert [(h.values, h.next, h.metadata) for h in history] == expected
    after_plan = history[1]
    forked = graph.invoke(None, after_plan.config)
    assert forked == {"visited": ["start", "plan", "act"]}
    again = list(graph.get_state_history(config))
    reference.invoke(None, list(reference.get_state_history(config))[1].config)
    assert [(h.values, h.next) for h in again] == [
        (h.values, h.next) for h in reference.get_state_history(config)
    ]
    # The fork hangs off the checkpoint it started from; the first branch is as it was.
    forked_from = again[0]
    while forked_from.parent_config is not None and forked_from not in history:
        forked_from = graph.get_state(forked_from.parent_config)
    assert (
        forked_from.config["configurable"]["checkpoint_id"]
        == (after_plan.config["configurable"]["checkpoint_id"])
    )
    assert again[len(again) - len(history) :] == history
    session = AgentSession.objects.get(external_id="trip-1")
    assert ThreadCheckpoint.objects.filter(session=session).count() == len(again)


def test_the_async_path_resumes_where_the_thread_left(client):
    config = {"configurable": {"thread_id": "trip-2"}}

    async def two_turns() -> tuple[Any, Any]:
        first = await build(AgentOpsSaver(client)).ainvoke({"visited": ["a"]}, config)
        second = await build(AgentOpsSaver(client)).ainvoke({"visited": ["b"]}, config)
        return first, second

    first, second = asyncio.run(two_turns())
    assert first == {"visited": ["a", "plan", "act"]}
    assert second == {"visited": ["a", "plan", "act", "b", "plan", "act"]}
