"""The MCP gateway against a real uvicorn server, driven by the ``mcp`` SDK's client: tools are
listed from the upstream; a read-only call returns at once; a destructive call waits until a
second person approves it, then the upstream receives exactly the approved arguments; a
rejected call returns ``isError`` with the reason and the upstream sees nothing. What the
upstream received is read from its own log, not from agentops."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from mcp.types import CallToolResult

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from gateway.models import McpSession
from projects.models import ApiToken
from projects.services import membership_set, project_default
from runs.models import Run, Step
from tests.gateway.conftest import gateway_client, seen, text
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.django_db(transaction=True)]


def wait_for_approval(timeout: float = 30) -> ApprovalRequest:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = ApprovalRequest.objects.filter(status="pending").first()
        if found is not None:
            return found
        time.sleep(0.1)
    raise AssertionError("no approval request was opened")


def test_tools_pass_the_gateway_under_approvals(asgi_server, bank, upstream_log, operator):
    reviewer = make_user("rita-gw", "reviewer")
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"

    async def scenario() -> None:
        async with gateway_client(url, token) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["lookup", "transfer", "slow", "quote"]
            assert listed.tools[1].annotations is not None
            assert listed.tools[1].annotations.destructive_hint is True

            looked = await client.call_tool("lookup", {"account": "A-1"})
            assert not looked.is_error
            assert json.loads(text(looked)) == {"tool": "lookup", "args": {"account": "A-1"}}

            # A transfer waits for a reviewer: the upstream has not seen it meanwhile.
            call = asyncio.ensure_future(client.call_tool("transfer", {"to": "B", "amount": 9}))
            approval = await asyncio.to_thread(wait_for_approval)
            assert not call.done()
            assert [c["tool"] for c in seen(upstream_log)] == ["lookup"]
            await asyncio.to_thread(
                approval_decide,
                approval_id=approval.pk,
                actor=Actor.for_user(reviewer),
                decision="approve",
                comment="ok",
                args={"to": "B", "amount": 7},
            )
            done = await asyncio.wait_for(call, 30)
            assert json.loads(text(done)) == {"tool": "transfer", "args": {"to": "B", "amount": 7}}

            # A rejected transfer: isError with the reason; the upstream never sees it.
            refused = asyncio.ensure_future(
                client.call_tool("transfer", {"to": "C", "amount": 500})
            )
            approval = await asyncio.to_thread(wait_for_approval)
            await asyncio.to_thread(
                approval_decide,
                approval_id=approval.pk,
                actor=Actor.for_user(reviewer),
                decision="reject",
                comment="far too much",
            )
            result = await asyncio.wait_for(refused, 30)
            assert result.is_error
            assert "far too much" in text(result)

    asyncio.run(scenario())
    calls = seen(upstream_log)
    assert [(c["tool"], c["args"]) for c in calls] == [
        ("lookup", {"account": "A-1"}),
        ("transfer", {"to": "B", "amount": 7}),
    ]
    # The session is one run of agent kind mcp; each call one step, with its outcome.
    session = McpSession.objects.get()
    run = Run.objects.get(pk=session.run_id)
    assert run.agent == "mcp"
    # The client closed its session (DELETE): the run is complete, and ended.
    assert run.client_done
    assert run.status == "succeeded"
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [(s.tool, s.status) for s in steps] == [
        ("lookup", "succeeded"),
        ("transfer", "succeeded"),
        ("transfer", "rejected"),
    ]
    assert calls[1]["meta"]["agentops/idempotency-key"] == steps[1].idempotency_key


def test_a_request_without_a_valid_token_or_role_is_refused(asgi_server, bank):
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    assert httpx2.post(url, json=body, headers=headers).status_code == 401
    bad = {**headers, "Authorization": "Bearer " + "0" * 64}
    assert httpx2.post(url, json=body, headers=bad).status_code == 401
    viewer = make_user("vic", "viewer")
    as_viewer = {**headers, "Authorization": f"Bearer {make_token(viewer)}"}
    assert httpx2.post(url, json=body, headers=as_viewer).status_code == 403
    unknown = f"{asgi_server.url}/mcp/no-such-upstream/"
    assert httpx2.post(unknown, json=body, headers=as_viewer).status_code == 404
    assert not Run.objects.exists()


def test_a_token_revoked_or_a_role_lost_meanwhile_is_refused_at_once(asgi_server, bank, operator):
    """The server keeps the tokens it admitted (``gateway.admission``): a change made in another
    process is refused from its next request on."""
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    token = make_token(operator)
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    # Admitted: the MCP server answers (a request outside any session is its 400).
    assert httpx2.post(url, json=body, headers=headers).status_code == 400
    assert httpx2.post(url, json=body, headers=headers).status_code == 400
    membership_set(project=project_default(), user=operator, role="viewer")
    assert httpx2.post(url, json=body, headers=headers).status_code == 403
    membership_set(project=project_default(), user=operator, role="operator")
    assert httpx2.post(url, json=body, headers=headers).status_code == 400
    ApiToken.objects.filter(user=operator).delete()
    assert httpx2.post(url, json=body, headers=headers).status_code == 401
    assert not Run.objects.exists()


def test_a_waiting_call_gets_progress_and_an_expired_approval_an_error(
    asgi_server, bank, upstream_log, operator
):
    """While a call waits for its approval the client hears progress at least every 10 s
    (``AGENTOPS_MCP_PROGRESS_SECONDS``, 5 here); when the approval expires, the call ends with
    ``isError`` and the upstream never sees it."""
    from django.utils import timezone

    from approvals.services import approval_expire_due

    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    heard: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(asyncio.get_running_loop().time())

    async def scenario() -> CallToolResult:
        async with gateway_client(url, token) as client:
            call = asyncio.ensure_future(
                client.call_tool(
                    "transfer", {"to": "E", "amount": 5}, progress_callback=on_progress
                )
            )
            approval = await asyncio.to_thread(wait_for_approval)
            for _ in range(300):  # the first progress notification, within 15 s
                if heard:
                    break
                await asyncio.sleep(0.05)
            assert heard, "no progress notification while waiting"
            assert not call.done()
            await asyncio.to_thread(
                ApprovalRequest.objects.filter(pk=approval.pk).update,
                expires_at=timezone.now(),
            )
            assert await asyncio.to_thread(approval_expire_due, actor=Actor.system("test")) == 1
            return await asyncio.wait_for(call, 30)

    result = asyncio.run(scenario())
    assert result.is_error
    assert "(approval_expired)" in text(result)
    assert seen(upstream_log) == []
