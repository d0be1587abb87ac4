"""The SDK's session calls against a scripted server (httpx.MockTransport): the paths, bodies
and headers they send, a session state write's If-Match naming the session, the subject
quoted in its path, and ``AgentOpsSession.get_items(limit)`` keeping the latest items."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from agentops_client import AsyncClient, Retry

SID = "22222222-2222-2222-2222-222222222222"
ITEMS = [{"role": "user", "content": "a"}, {"type": "function_call", "name": "f"}]


class Server:
    """Answers every request from ``answers`` by (method, path) and keeps the requests."""

    def __init__(self, answers: dict[tuple[str, str], Any]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.raw_path.decode().split("?")[0]
        body = self.answers[(request.method, path)]
        headers = {"ETag": f'"{SID}:1"'} if request.url.path.endswith("/state/") else {}
        return httpx.Response(200, json=body, headers=headers)

    def client(self) -> AsyncClient:
        return AsyncClient(
            "http://agentops.test",
            "token",
            retry=Retry(attempts=1, base=0.0, cap=0.0),
            websocket=False,
            transport=httpx.MockTransport(self),
        )


def test_session_calls_send_what_the_api_takes():
    base = f"/api/v1/sessions/{SID}"
    server = Server(
        {
            ("POST", f"{base}/messages/"): {"added": 2},
            ("POST", f"{base}/messages/pop/"): {"item": None},
            ("PUT", f"{base}/state/"): {"version": 1, "state": {"a": 1}, "schema_version": 1},
            ("DELETE", "/api/v1/subjects/user%2F7/"): {"sessions": 0},
        }
    )
    client = server.client()
    asyncio.run(client.add_session_items(SID, ITEMS))
    assert asyncio.run(client.pop_session_item(SID)) is None
    written = asyncio.run(client.put_session_state(SID, {"a": 1}, base=0))
    asyncio.run(client.erase_subject("user/7", project="alpha"))
    added, popped, put, erased = server.requests
    assert json.loads(added.content) == {"items": ITEMS}
    assert "Idempotency-Key" in added.headers
    assert "Idempotency-Key" in popped.headers
    assert put.headers["If-Match"] == f'"{SID}:0"'
    assert written.etag == f'"{SID}:1"'
    assert erased.url.raw_path == b"/api/v1/subjects/user%2F7/?project=alpha"


@pytest.mark.parametrize(("limit", "expected"), [(None, ITEMS), (1, ITEMS[1:]), (0, [])])
def test_get_items_answers_the_latest_items(limit, expected):
    pytest.importorskip("agents")
    from agentops_client.openai_agents import AgentOpsSession

    context = {"messages": ITEMS, "tokens": 9, "compactions": []}
    server = Server({("GET", f"/api/v1/sessions/{SID}/context/"): context})
    session = AgentOpsSession(server.client(), SID)
    assert asyncio.run(session.get_items(limit)) == expected
