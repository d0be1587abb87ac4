"""The SDK's agent-state calls against a scripted server (httpx.MockTransport): the If-Match and
media type each write sends, a write never sent twice, ``update_state`` calling its function
again on 412 and giving up after its attempts."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from agentops_client import AsyncClient, PreconditionFailed, Retry, ServerError

RUN = "11111111-1111-1111-1111-111111111111"
STATE = f"/api/v1/runs/{RUN}/state/"


class StateServer:
    """A run's state at ``version``: GET answers it with its ETag; a write answers each of
    ``write_answers`` in turn (status, or None: apply it) and keeps every request."""

    def __init__(self, state: dict[str, Any], write_answers: list[int | None]) -> None:
        self.version, self.state = 0, state
        self.write_answers = write_answers
        self.writes: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == STATE
        if request.method != "GET":
            self.writes.append(request)
            status = self.write_answers.pop(0)
            if status is not None:
                return httpx.Response(status, json={"detail": "no", "version": self.version})
            self.version += 1
            self.state = json.loads(request.content)
        etag = f'"{RUN}:{self.version}"'
        body = {"version": self.version, "state": self.state, "schema_version": 1}
        return httpx.Response(200, json=body, headers={"ETag": etag})

    def client(self) -> AsyncClient:
        return AsyncClient(
            "http://agentops.test",
            "token",
            retry=Retry(attempts=4, base=0.0, cap=0.0),
            websocket=False,
            transport=httpx.MockTransport(self),
        )


def test_writes_send_the_version_as_if_match_and_the_patch_media_type():
    server = StateServer({"a": 1}, [None, None, None])
    client = server.client()
    read = asyncio.run(client.get_state(RUN))
    asyncio.run(client.put_state(RUN, {"a": 2}, base=read, rationale="r", step_index=3))
    asyncio.run(client.patch_state(RUN, {"a": None}, base=1))
    asyncio.run(client.patch_state(RUN, [{"op": "add", "path": "/b", "value": 1}], base=2))
    sent = [
        (r.method, r.headers["If-Match"], r.headers["Content-Type"], dict(r.url.params))
        for r in server.writes
    ]
    assert sent == [
        ("PUT", f'"{RUN}:0"', "application/json", {"rationale": "r", "step_index": "3"}),
        ("PATCH", f'"{RUN}:1"', "application/merge-patch+json", {}),
        ("PATCH", f'"{RUN}:2"', "application/json-patch+json", {}),
    ]


def test_a_write_is_not_sent_again_after_a_5xx():
    server = StateServer({}, [503])
    with pytest.raises(ServerError):
        asyncio.run(server.client().put_state(RUN, {"x": 1}, base=0))
    assert len(server.writes) == 1


def test_update_state_reads_again_and_reapplies_after_412_until_its_attempts_end():
    server = StateServer({"n": 1}, [412, 412, None])
    seen: list[dict[str, Any]] = []

    def bump(state: dict[str, Any]) -> dict[str, Any]:
        seen.append(state)
        return {"n": state["n"] + 1}

    written = asyncio.run(server.client().update_state(RUN, bump))
    assert (written.version, written.state) == (1, {"n": 2})
    assert len(seen) == 3
    assert len(server.writes) == 3

    losing = StateServer({"n": 1}, [412, 412])
    with pytest.raises(PreconditionFailed) as lost:
        asyncio.run(losing.client().update_state(RUN, bump, attempts=2))
    assert lost.value.version == 0
    with pytest.raises(ValueError, match="attempts"):
        asyncio.run(losing.client().update_state(RUN, bump, attempts=0))
