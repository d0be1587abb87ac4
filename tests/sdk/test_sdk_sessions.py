"""An OpenAI Agents SDK agent keeps its conversation in an agentops session across processes:
three turns, each in a process of its own (``tests/sdk/session_turn.py``) against a live
agentops (daphne) and the replay model server; the third process's model call holds the first
two turns, and after a compaction between the second and third it holds the summary and the
recent turns instead of the compacted ones. The model server's recording (``GET
/v1/requests``) is what the model was sent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import agentops_client
import httpx
import pytest
from agentops_client import Client

from examples.airline.model_server import ReplayServer, model_name
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.long, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
MODEL = model_name(1, 0)
ANSWERS = ["Hello Ada.", "Paris is sunny.", "Yes, tomorrow too."]


@pytest.fixture
def model_server(tmp_path: Path) -> Any:
    recording = [
        {
            "task_id": 1,
            "trial": 0,
            "traj": [{"role": "assistant", "content": answer} for answer in ANSWERS],
        }
    ]
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(recording))
    server = ReplayServer(path)
    yield server
    server.close()


def run_turn(url: str, token: str, session_id: str, model_url: str, text: str) -> str:
    """One agent turn in a new process, with the SDK this test imports."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(agentops_client.__file__).parents[1]), str(ROOT)]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.sdk.session_turn",
            url,
            token,
            session_id,
            model_url,
            MODEL,
            text,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def sent(model_url: str) -> list[list[dict[str, Any]]]:
    """The messages of every model call the replay server received."""
    requests = httpx.get(f"{model_url}/v1/requests").json()["requests"]
    return [request["messages"] for request in requests]


def contents(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in messages]


def test_three_processes_share_one_conversation(asgi_server, seeded, model_server):
    token = make_token(make_user("session-agent", "operator"))
    with Client(asgi_server.url, token, websocket=False) as client:
        sid = client.create_session("chat-ada", subject="user-ada").id
    url, model_url = asgi_server.url, model_server.url
    assert run_turn(url, token, sid, model_url, "Hi, I am Ada.") == ANSWERS[0]
    assert run_turn(url, token, sid, model_url, "Weather in Paris?") == ANSWERS[1]
    assert run_turn(url, token, sid, model_url, "And tomorrow?") == ANSWERS[2]
    third = sent(model_url)[2]
    assert contents(third) == [
        ("user", "Hi, I am Ada."),
        ("assistant", ANSWERS[0]),
        ("user", "Weather in Paris?"),
        ("assistant", ANSWERS[1]),
        ("user", "And tomorrow?"),
    ]


def test_a_compaction_between_turns_leaves_the_summary_and_the_recent_turns(
    asgi_server, seeded, model_server
):
    token = make_token(make_user("session-agent", "operator"))
    url, model_url = asgi_server.url, model_server.url
    with Client(url, token, websocket=False) as client:
        sid = client.create_session("chat-ada", subject="user-ada").id
        run_turn(url, token, sid, model_url, "Hi, I am Ada.")
        run_turn(url, token, sid, model_url, "Weather in Paris?")
        items = client.session_messages(sid)["messages"]
        assert len(items) == 4
        client.compact_session(sid, "Ada greeted the assistant.", first=0, last=1)
        answer = run_turn(url, token, sid, model_url, "And tomorrow?")
        context = client.session_context(sid)["messages"]
    third = sent(model_url)[2]
    assert contents(third) == [
        ("system", "Ada greeted the assistant."),
        ("user", "Weather in Paris?"),
        ("assistant", ANSWERS[1]),
        ("user", "And tomorrow?"),
    ]
    # The session keeps the Agents SDK's items verbatim (Responses-API shapes): its active
    # context is the summary, the second turn, and the third turn's question and answer.
    assert [item.get("role") for item in context] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert context[0]["content"] == "Ada greeted the assistant."
    # (The replay server matches recorded turns by the answers a request holds: with the
    # first answer compacted away it replays that one again.)
    assert context[4]["content"][0]["text"] == answer


def test_the_session_protocol_pops_clears_and_limits(asgi_server, seeded):
    from agentops_client import AsyncClient
    from agentops_client.openai_agents import AgentOpsSession

    from runs.models import Message

    token = make_token(make_user("session-agent", "operator"))
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}

    async def scenario() -> tuple[Any, ...]:
        async with AsyncClient(asgi_server.url, token, websocket=False) as client:
            sid = (await client.create_session("proto")).id
            session = AgentOpsSession(client, sid)
            await session.add_items([{"role": "user", "content": "a"}, call])
            await session.add_items([{"role": "assistant", "content": "b"}])
            latest = await session.get_items(limit=2)
            popped = await session.pop_item()
            after_pop = await session.get_items()
            await session.clear_session()
            return (
                sid,
                latest,
                popped,
                after_pop,
                await session.get_items(),
                await session.pop_item(),
            )

    sid, latest, popped, after_pop, cleared, nothing = asyncio.run(scenario())
    assert latest == [call, {"role": "assistant", "content": "b"}]
    assert popped == {"role": "assistant", "content": "b"}
    assert after_pop == [{"role": "user", "content": "a"}, call]
    assert cleared == []
    assert nothing is None
    # Nothing was destroyed: every item is kept, marked removed.
    assert Message.objects.filter(session_id=sid, removed_at__isnull=False).count() == 3
