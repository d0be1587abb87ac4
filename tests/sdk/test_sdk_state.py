"""The Python SDK's agent-state methods against a real agentops (daphne, PostgreSQL): typed
reads and writes made against a version, a stale version raising ``PreconditionFailed``, and
``update_state`` re-reading and re-applying its function until no update is lost."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from agentops_client import AgentState, Client, Conflict, PreconditionFailed

from runs.models import StateVersion
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

# Updates each of the two writers makes in the race.
UPDATES = 15


@pytest.fixture
def clients(asgi_server, seeded) -> Iterator[list[Client]]:
    """Two agents' clients (two users, both operators)."""
    made = [
        Client(asgi_server.url, make_token(make_user(name, "operator")), websocket=False)
        for name in ("agent-a", "agent-b")
    ]
    yield made
    for client in made:
        client.close()


def test_reads_and_writes_are_typed_and_made_against_a_version(clients):
    agent, other = clients
    run_id = agent.create_run("remember").id
    start = agent.get_state(run_id)
    assert start == AgentState(version=0, state={}, schema_version=1, etag=f'"{run_id}:0"')
    put = agent.put_state(run_id, {"plan": ["a"], "notes": {"x": 1}}, base=start, rationale="why")
    assert (put.version, put.etag) == (1, f'"{run_id}:1"')
    merged = other.patch_state(run_id, {"notes": {"x": None, "y": 2}}, base=put)
    assert merged.state == {"plan": ["a"], "notes": {"y": 2}}
    patched = agent.patch_state(run_id, [{"op": "add", "path": "/plan/-", "value": "b"}], base=2)
    assert patched.state == {"plan": ["a", "b"], "notes": {"y": 2}}
    assert agent.get_state(run_id, version=1).state == {"plan": ["a"], "notes": {"x": 1}}

    with pytest.raises(PreconditionFailed) as stale:
        other.put_state(run_id, {"lost": True}, base=merged)
    assert (stale.value.status, stale.value.version) == (412, 3)
    with pytest.raises(Conflict, match="does not apply"):
        agent.patch_state(run_id, [{"op": "remove", "path": "/plan/9"}], base=patched)
    assert agent.get_state(run_id).state == patched.state
    assert StateVersion.objects.filter(run_id=run_id).count() == 3


def test_update_state_loses_no_update_when_two_agents_race(clients):
    run_id = clients[0].create_run("race").id
    calls = [0, 0]

    def updates(i: int) -> None:
        def add(state: dict[str, list[str]]) -> dict[str, list[str]]:
            calls[i] += 1
            return {**state, "log": [*state.get("log", []), f"{i}-{len(state.get('log', []))}"]}

        for _ in range(UPDATES):
            clients[i].update_state(run_id, add, attempts=100)

    threads = [threading.Thread(target=updates, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    final = clients[0].get_state(run_id)
    assert final.version == 2 * UPDATES
    assert len(final.state["log"]) == 2 * UPDATES
    assert (
        sorted(entry.split("-")[0] for entry in final.state["log"])
        == ["0"] * UPDATES + ["1"] * UPDATES
    )
    # Every call of the function was either written or refused and called again.
    assert sum(calls) >= 2 * UPDATES
