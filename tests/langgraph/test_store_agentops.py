"""What ``AgentOpsStore`` has beyond LangGraph's store contract (``test_store_conformance``),
against a live agentops (daphne): ``query`` is PostgreSQL full-text search (a put's ``index``
picks the fields it reads); TTLs in minutes, renewed by reads as ``TTLConfig`` says and gone
from every read once expired; another project's token reads nothing; every write is an
audited memory item; and a graph compiled with ``AgentOpsSaver`` and ``AgentOpsStore`` keeps
what one thread learnt for the next, sync and async."""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from agentops_client import Client
from agentops_client.errors import BadRequest, PermissionDenied
from agentops_client.langgraph import AgentOpsSaver, AgentOpsStore
from agentops_client.langgraph.store import ttl_seconds
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from audit.models import AuditEvent
from memory.models import MemoryItem, MemoryVersion
from projects.models import Project
from runs.models import AgentSession
from tests.langgraph.store_calls import Calls
from testsupport.factories import make_token, make_user

PREFS = ("users", "42", "prefs")


def test_ttl_minutes_become_whole_seconds_rounded_up():
    assert ttl_seconds(3 / 60) == 3  # 3.0000000000000004 s as floats multiply
    assert ttl_seconds(0.5) == 30
    assert ttl_seconds(1 / 600) == 1
    assert ttl_seconds(1.01) == 61
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            ttl_seconds(bad)


def test_an_index_configuration_is_refused_clearly():
    # No request is made: the port is never connected to.
    with (
        Client("http://127.0.0.1:9", "no-token", websocket=False) as client,
        pytest.raises(NotImplementedError, match="no vector"),
    ):
        AgentOpsStore(client, index={"dims": 3, "embed": lambda texts: [[0.0] * 3]})


@pytest.fixture
def client(asgi_server, seeded) -> Iterator[Client]:
    token = make_token(make_user("memory-agent", "operator"))
    with Client(asgi_server.url, token, websocket=False) as client:
        yield client


@pytest.fixture(params=["sync", "async"])
def s(client: Client, request: pytest.FixtureRequest) -> Calls:
    return Calls(AgentOpsStore(client), request.param)


def row(namespace: tuple[str, ...], key: str) -> MemoryItem:
    return MemoryItem.objects.get(namespace_path=".".join(namespace), key=key)


@pytest.mark.django_db(transaction=True)
def test_query_is_ranked_full_text_search(s):
    s.put(PREFS, "tone", {"text": "The user prefers concise technical explanations"})
    s.put(PREFS, "theme", {"text": "Preference: a dark theme, and concise menus", "n": 2})
    s.put(PREFS, "coffee", {"text": "Likes espresso in the morning", "n": 2})
    s.put(("users", "7"), "tone", {"text": "prefers long answers"})

    found = s.search(PREFS, query="prefers")
    # Stemmed English: "prefers" finds "Preference"; "coffee" has neither word.
    assert {hit.key for hit in found} == {"tone", "theme"}
    assert all(hit.score is not None and hit.score > 0 for hit in found)
    assert [hit.score for hit in found] == sorted((hit.score for hit in found), reverse=True)
    best = s.search(PREFS, query="concise technical")
    assert [hit.key for hit in best] == ["tone"]
    assert [hit.key for hit in s.search(PREFS, query="concise", filter={"n": 2})] == ["theme"]
    everyone = s.search(("users",), query="prefers")
    assert {(hit.namespace, hit.key) for hit in everyone} == {
        (PREFS, "tone"),
        (PREFS, "theme"),
        (("users", "7"), "tone"),
    }
    assert s.search(PREFS, query="tea") == []


@pytest.mark.django_db(transaction=True)
def test_a_puts_index_picks_what_full_text_search_reads(s):
    value = {"title": "Espresso notes", "body": "grind finer for ristretto"}
    s.put(("notes",), "titled", value, index=["title"])
    s.put(("notes",), "hidden", {"title": "Espresso hidden"}, index=False)
    s.put(("notes",), "whole", value)
    assert {hit.key for hit in s.search(("notes",), query="espresso")} == {"titled", "whole"}
    assert {hit.key for hit in s.search(("notes",), query="ristretto")} == {"whole"}
    # Not indexed: still there for get and a search without a query.
    assert s.get(("notes",), "hidden").value == {"title": "Espresso hidden"}
    assert {hit.key for hit in s.search(("notes",))} == {"titled", "hidden", "whole"}


@pytest.mark.django_db(transaction=True)
def test_an_item_is_gone_from_every_read_once_its_ttl_has_passed(s):
    s.put(PREFS, "brief", {"text": "short lived note"}, ttl=2 / 60)
    s.put(PREFS, "kept", {"text": "long lived note"})
    s.put(("scratch",), "brief", {"text": "short lived note"}, ttl=2 / 60)
    assert row(PREFS, "brief").ttl_seconds == 2
    assert s.get(PREFS, "brief") is not None
    assert s.list_namespaces() == [("scratch",), PREFS]
    time.sleep(2.5)
    assert s.get(PREFS, "brief") is None
    assert [hit.key for hit in s.search(PREFS)] == ["kept"]
    assert [hit.key for hit in s.search(PREFS, query="note")] == ["kept"]
    assert s.list_namespaces() == [PREFS]
    # A put after the expiry starts a new item.
    s.put(PREFS, "brief", {"text": "again"})
    assert s.get(PREFS, "brief").value == {"text": "again"}


@pytest.mark.django_db(transaction=True)
def test_reads_renew_a_ttl_unless_told_not_to(s):
    s.put(PREFS, "tone", {"text": "concise"}, ttl=1)
    s.put(PREFS, "forever", {"text": "concise"})
    first = row(PREFS, "tone").expires_at
    assert first is not None
    assert row(PREFS, "tone").ttl_seconds == 60
    s.get(PREFS, "tone", refresh_ttl=False)
    s.search(PREFS, refresh_ttl=False)
    assert row(PREFS, "tone").expires_at == first
    s.get(PREFS, "tone")  # LangGraph's default: refresh
    after_get = row(PREFS, "tone").expires_at
    assert after_get > first
    s.search(PREFS, query="concise")
    assert row(PREFS, "tone").expires_at > after_get
    assert row(PREFS, "forever").expires_at is None
    # A put without a TTL (no default configured) makes the item permanent again.
    s.put(PREFS, "tone", {"text": "verbose"})
    assert row(PREFS, "tone").expires_at is None


@pytest.mark.django_db(transaction=True)
def test_a_ttl_config_sets_the_default_ttl_and_the_default_refresh(client):
    config = {"default_ttl": 0.5, "refresh_on_read": False}
    s = Calls(AgentOpsStore(client, ttl=config), "sync")
    s.put(PREFS, "tone", {"text": "concise"})
    item = row(PREFS, "tone")
    assert item.ttl_seconds == 30
    assert item.expires_at - item.updated_at <= timedelta(seconds=30)
    s.get(PREFS, "tone")
    s.search(PREFS)
    assert row(PREFS, "tone").expires_at == item.expires_at
    s.get(PREFS, "tone", refresh_ttl=True)
    assert row(PREFS, "tone").expires_at > item.expires_at
    s.put(PREFS, "always", {"text": "x"}, ttl=None)
    assert row(PREFS, "always").expires_at is None


@pytest.mark.django_db(transaction=True)
def test_another_projects_token_reads_and_changes_nothing(asgi_server, client):
    mine = Calls(AgentOpsStore(client), "sync")
    mine.put(PREFS, "tone", {"text": "concise"})
    other = Project.objects.create(slug="other", name="Other")
    outsider = make_user("oscar", "operator", project=other)
    viewer = make_user("vera", "viewer")
    with (
        Client(asgi_server.url, make_token(outsider, other), websocket=False) as theirs_client,
        Client(asgi_server.url, make_token(viewer), websocket=False) as viewer_client,
    ):
        theirs = Calls(AgentOpsStore(theirs_client), "async")
        assert theirs.get(PREFS, "tone") is None
        assert theirs.search(("users",)) == []
        assert theirs.search(("users",), query="concise") == []
        assert theirs.list_namespaces() == []
        theirs.delete(PREFS, "tone")
        theirs.put(PREFS, "tone", {"text": "theirs"})
        assert theirs.get(PREFS, "tone").value == {"text": "theirs"}
        # Naming the project does not help: the token is of the other project only.
        named = Calls(AgentOpsStore(theirs_client, project="default"), "sync")
        with pytest.raises(BadRequest, match="project"):
            named.get(PREFS, "tone")
        # A viewer of the project reads its memory but may not write it.
        looker = Calls(AgentOpsStore(viewer_client), "sync")
        assert looker.get(PREFS, "tone").value == {"text": "concise"}
        with pytest.raises(PermissionDenied):
            looker.put(PREFS, "tone", {"text": "viewer's"})
    assert mine.get(PREFS, "tone").value == {"text": "concise"}
    assert MemoryItem.objects.filter(key="tone").count() == 2


@pytest.mark.django_db(transaction=True)
def test_every_write_is_an_audited_memory_version(client):
    s = Calls(AgentOpsStore(client), "sync")
    s.put(PREFS, "tone", {"text": "concise"})
    s.put(PREFS, "tone", {"text": "verbose"})
    item_id = row(PREFS, "tone").pk
    s.delete(PREFS, "tone")
    versions = MemoryVersion.objects.filter(item_id=item_id).order_by("id")
    assert [(v.operation, v.value) for v in versions] == [
        ("put", {"text": "concise"}),
        ("put", {"text": "verbose"}),
        ("delete", {"text": "verbose"}),
    ]
    assert {v.actor_name for v in versions} == {"memory-agent"}
    events = AuditEvent.objects.filter(object_id=str(item_id)).order_by("id")
    assert [(e.verb, e.payload["before"], e.payload["after"]) for e in events] == [
        ("memory.put", None, {"text": "concise"}),
        ("memory.put", {"text": "concise"}, {"text": "verbose"}),
        ("memory.delete", {"text": "verbose"}, None),
    ]


class Chat(TypedDict):
    user: str
    said: str
    recalled: Annotated[list[str], operator.add]


def remember_and_recall(saver: AgentOpsSaver, store: AgentOpsStore) -> Any:
    """A graph whose ``recall`` node searches the user's memories for what was said (full
    text: every word of it), and whose ``remember`` node keeps "I like ..." as a memory."""

    def recall(state: Chat, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        found = runtime.store.search(("memories", state["user"]), query=state["said"])
        return {"recalled": [hit.value["fact"] for hit in found]}

    def remember(state: Chat, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        if state["said"].startswith("I like "):
            fact = state["said"].removeprefix("I like ")
            runtime.store.put(("memories", state["user"]), fact, {"fact": f"likes {fact}"})
        return {}

    graph = StateGraph(Chat)
    graph.add_node("recall", recall)
    graph.add_node("remember", remember)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "remember")
    graph.add_edge("remember", END)
    return graph.compile(checkpointer=saver, store=store)


@pytest.mark.django_db(transaction=True)
def test_a_graph_keeps_what_one_thread_learnt_for_the_next(client):
    graph = remember_and_recall(AgentOpsSaver(client), AgentOpsStore(client))
    first = {"configurable": {"thread_id": "chat-1"}}
    graph.invoke({"user": "u42", "said": "I like espresso", "recalled": []}, first)
    # Another thread, another graph object: only the store carries the fact over.
    graph = remember_and_recall(AgentOpsSaver(client), AgentOpsStore(client))
    second = {"configurable": {"thread_id": "chat-2"}}
    out = graph.invoke({"user": "u42", "said": "espresso?", "recalled": []}, second)
    assert out["recalled"] == ["likes espresso"]
    assert graph.get_state(second).values["recalled"] == ["likes espresso"]
    third = {"configurable": {"thread_id": "chat-3"}}
    other_user = graph.invoke({"user": "u7", "said": "espresso?", "recalled": []}, third)
    assert other_user["recalled"] == []
    item = row(("memories", "u42"), "espresso")
    assert (item.value, item.actor_name) == ({"fact": "likes espresso"}, "memory-agent")
    threads = set(AgentSession.objects.values_list("external_id", flat=True))
    assert threads == {"chat-1", "chat-2", "chat-3"}


@pytest.mark.django_db(transaction=True)
def test_an_async_graph_uses_the_store_the_same_way(client):
    async def two_threads() -> dict[str, Any]:
        graph = remember_and_recall(AgentOpsSaver(client), AgentOpsStore(client))
        await graph.ainvoke(
            {"user": "u9", "said": "I like ristretto", "recalled": []},
            {"configurable": {"thread_id": "a-1"}},
        )
        return await graph.ainvoke(
            {"user": "u9", "said": "ristretto?", "recalled": []},
            {"configurable": {"thread_id": "a-2"}},
        )

    assert asyncio.run(two_threads())["recalled"] == ["likes ristretto"]
    assert row(("memories", "u9"), "ristretto").value == {"fact": "likes ristretto"}
