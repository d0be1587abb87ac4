"""An MCP session belongs to the token's user in the token's project that opened it (issue 29,
item 2). Against a real uvicorn, with the ``mcp`` SDK's client as the session's owner: another
user (a viewer of the owner's project, an operator of their own) and the owner's own token of
another project name the session in a call, its event stream, its ``DELETE`` and a call by
the sessionless protocol, and are answered 404 as for a session that does not exist; nothing
changes, the upstream is never called (its own log says so), and the owner's session goes
on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

from gateway.models import McpSession
from projects.models import Project
from projects.services import membership_set
from runs.models import Run, Step
from tests.gateway.conftest import gateway_client, seen, text
from testsupport.factories import make_token, make_user
from testsupport.state import assert_unchanged

pytestmark = [pytest.mark.django_db(transaction=True)]

ACCEPT = "application/json, text/event-stream"


def _call(session_id: str, token: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "lookup", "arguments": {"account": "A-9"}},
    }
    return {
        "json": body,
        "headers": {
            "Authorization": f"Bearer {token}",
            "Mcp-Session-Id": session_id,
            "Accept": ACCEPT,
        },
    }


# A call by the sessionless protocol: a request of its own, that the SDK serves without its
# session manager.
SESSIONLESS = {
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "lookup",
}
SESSIONLESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _intrude(url: str, session_id: str, token: str) -> list[int]:
    """The statuses of a call, a GET of the event stream, a DELETE and a call by the
    sessionless protocol naming ``session_id`` with ``token``."""
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
    sessionless = _call(session_id, token)
    sessionless["json"]["params"]["_meta"] = SESSIONLESS_META
    sessionless["headers"] |= SESSIONLESS
    async with httpx2.AsyncClient(timeout=30) as http:
        call = await http.post(url, **_call(session_id, token))
        async with http.stream("GET", url, headers={**headers, "Accept": ACCEPT}) as stream:
            listened = stream.status_code
        ended = await http.delete(url, headers=headers)
        unchecked = await http.post(url, **sessionless)
    return [call.status_code, listened, ended.status_code, unchecked.status_code]


def test_another_caller_cannot_call_listen_to_or_end_a_session(asgi_server, bank, upstream_log):
    alpha = Project.objects.create(slug="alpha", name="Alpha")
    beta = Project.objects.create(slug="beta", name="Beta")
    owner = make_user("owen-gw", "operator", project=alpha)
    membership_set(project=beta, user=owner, role="operator")
    # The attacker: a viewer where the session is, an operator elsewhere.
    intruder = make_user("ivy-gw", "viewer", project=alpha)
    membership_set(project=beta, user=intruder, role="operator")
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    owner_token = make_token(owner, alpha)
    # The owner's own token of another project is another caller too.
    others = [make_token(intruder, beta), make_token(owner, beta)]

    async def scenario() -> str:
        async with gateway_client(url, owner_token) as client:
            first = await client.call_tool("lookup", {"account": "A-1"})
            assert not first.is_error
            session_id = await asyncio.to_thread(
                lambda: McpSession.objects.values_list("session_id", flat=True).get()
            )

            def refused(token: str) -> None:
                with assert_unchanged():
                    statuses = asyncio.run(_intrude(url, session_id, token))
                assert statuses == [404, 404, 404, 404]

            for token in others:
                await asyncio.to_thread(refused, token)
            # The session was neither used nor ended: its owner goes on in it.
            again = await client.call_tool("lookup", {"account": "A-2"})
            return text(again)

    assert json.loads(asyncio.run(scenario()))["args"] == {"account": "A-2"}
    assert [c["args"] for c in seen(upstream_log)] == [{"account": "A-1"}, {"account": "A-2"}]
    run = Run.objects.get()
    assert (run.project_id, run.requested_by_id) == (alpha.pk, owner.pk)
    steps = Step.objects.filter(run=run).order_by("index")
    assert [(s.args, s.requested_by_id) for s in steps] == [
        ({"account": "A-1"}, owner.pk),
        ({"account": "A-2"}, owner.pk),
    ]
    # Ended by its owner (the client's DELETE on leaving), and only then.
    assert run.client_done
