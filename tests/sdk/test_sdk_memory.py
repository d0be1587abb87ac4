"""The Python SDK's memory methods against a real agentops (uvicorn, PostgreSQL), sync and
async: put, get, search, list_namespaces, history and delete as LangGraph's ``BaseStore``;
a stale ``if_match`` raising ``PreconditionFailed``; another project's items unseen; a
gated ``memory.put`` step waiting for a reviewer, then rejected with the reason reaching the
agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from agentops_client import (
    AsyncClient,
    AsyncMemory,
    BadRequest,
    Client,
    Memory,
    NotFound,
    PreconditionFailed,
)

from approvals.models import RiskRule
from memory.models import MemoryItem
from projects.models import Project
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

PREFS = ("project", "user:42", "preferences")


@pytest.fixture
def client(asgi_server, seeded) -> Iterator[Client]:
    made = Client(asgi_server.url, make_token(make_user("agent", "operator")), websocket=False)
    yield made
    made.close()


def test_put_get_search_namespaces_history_and_delete(client):
    memory = Memory(client)
    item = memory.put(PREFS, "tone", {"style": "concise"}, text="prefers concise answers")
    assert (item.namespace, item.key, item.version) == (PREFS, "tone", 1)
    again = memory.put(PREFS, "tone", {"style": "terse"}, if_match=item, tags=["style"])
    assert again.version == 2
    with pytest.raises(PreconditionFailed) as stale:
        memory.put(PREFS, "tone", {"style": "lost"}, if_match=item)
    assert stale.value.version == 2
    assert memory.get(PREFS, "tone").value == {"style": "terse"}
    assert memory.get(PREFS, "missing") is None
    memory.put(("project", "user:7"), "city", {"city": "Lyon"}, text="lives in Lyon")
    hits = memory.search(("project",), query="Lyon")
    assert [(hit.key, hit.score is not None) for hit in hits] == [("city", True)]
    assert [hit.key for hit in memory.search(("project",), filter={"style": "terse"})] == ["tone"]
    assert memory.list_namespaces(prefix=("project",), max_depth=2) == [
        ("project", "user:42"),
        ("project", "user:7"),
    ]
    assert [v["version"] for v in memory.history(again)] == [2, 1]
    with pytest.raises(BadRequest) as bad:
        memory.put(("a.b",), "k", {})
    assert bad.value.field == "namespace"
    memory.delete(PREFS, "tone", reason="user asked")
    assert memory.get(PREFS, "tone") is None
    with pytest.raises(NotFound):
        memory.history(again)


def test_the_async_client_does_the_same(asgi_server, seeded):
    token = make_token(make_user("agent", "operator"))

    async def scenario() -> tuple[int, list[str]]:
        async with AsyncClient(asgi_server.url, token, websocket=False) as client:
            memory = AsyncMemory(client)
            await memory.put(PREFS, "a", {"n": 1})
            await memory.put(PREFS, "b", {"n": 5})
            found = await memory.search(PREFS, filter={"n": {"$gte": 2}})
            item = await memory.get(PREFS, "a")
            assert item is not None
            return item.version, [hit.key for hit in found]

    assert asyncio.run(scenario()) == (1, ["b"])


def test_another_projects_memory_is_not_seen(asgi_server, client, seeded):
    Memory(client).put(PREFS, "secret", {"x": 1})
    other = Project.objects.create(slug="other", name="Other")
    outsider = Client(
        asgi_server.url,
        make_token(make_user("oscar", "operator", project=other), other),
        websocket=False,
    )
    try:
        memory = Memory(outsider)
        assert memory.get(PREFS, "secret") is None
        assert memory.search(()) == []
        with pytest.raises(NotFound):
            memory.history(str(MemoryItem.objects.get().pk))
    finally:
        outsider.close()


def test_a_gated_memory_write_waits_and_a_rejection_reaches_the_agent(asgi_server, client):
    RiskRule.objects.create(
        pattern="memory.put", condition='namespace[0] == "policies"', risk="high", priority=5
    )
    reviewer = Client(asgi_server.url, make_token(make_user("rita", "reviewer")), websocket=False)
    try:
        run = client.create_run("remember a policy")
        args = {"namespace": ["policies"], "key": "refunds", "value": {"max": 5000}}
        step = client.append_step(run.id, "memory.put", args, rationale="the user said so")
        assert step.status == "awaiting_approval"
        (approval,) = reviewer.pending_approvals()
        reviewer.reject(approval.id, "policies come from finance")
        step = client.get_step(run.id, step.id)
        assert step.status == "rejected"
        assert step.error["reason"] == "policies come from finance"
        assert Memory(client).get(("policies",), "refunds") is None
    finally:
        reviewer.close()
