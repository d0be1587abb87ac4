"""Tool grants through the MCP gateway, driven by the ``mcp`` SDK's client against a real
uvicorn server: ``tools/list`` shows a session only the tools its token's and project's
grants allow, and a call outside them gets ``isError`` with the reason, ends ``refused`` and
never reaches the upstream (read from the upstream's own log)."""

from __future__ import annotations

import asyncio

import pytest

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from gateway.models import McpSession
from projects.services import project_default
from runs.models import Run, Step, StepAttempt, ToolCall
from runs.policy import project_grant_set
from tests.gateway.conftest import gateway_client, seen, text
from testsupport.factories import make_token

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_granted_session_lists_and_calls_only_its_tools(
    asgi_server, bank, upstream_log, operator
):
    token = make_token(
        operator,
        grant={"tools": ["lookup", "transfer"], "constraints": {"transfer": "amount <= 5"}},
    )
    project_grant_set(
        project_id=project_default().pk,
        actor=Actor.system("test"),
        grant={"tools": ["lookup", "transfer", "slow"]},
    )
    url = f"{asgi_server.url}/mcp/{bank.name}/"

    async def scenario() -> None:
        async with gateway_client(url, token) as client:
            listed = await client.list_tools()
            # slow is the project's but not the token's: not shown.
            assert [t.name for t in listed.tools] == ["lookup", "transfer"]

            looked = await client.call_tool("lookup", {"account": "A-1"})
            assert not looked.is_error

            unlisted = await client.call_tool("slow", {"seconds": 0})
            assert unlisted.is_error
            assert "not_granted" in text(unlisted)
            assert "slow is not among the granted tools" in text(unlisted)

            too_much = await client.call_tool("transfer", {"to": "B", "amount": 900})
            assert too_much.is_error
            assert "amount <= 5" in text(too_much)

    asyncio.run(scenario())
    # The upstream saw the granted call only.
    assert [(c["tool"], c["args"]) for c in seen(upstream_log)] == [("lookup", {"account": "A-1"})]
    run = Run.objects.get(pk=McpSession.objects.get().run_id)
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [(s.tool, s.status) for s in steps] == [
        ("lookup", "succeeded"),
        ("slow", "refused"),
        ("transfer", "refused"),
    ]
    assert all(s.error["type"] == "not_granted" for s in steps[1:])
    # Refused before any gate: the high-risk transfer opened no approval request, and
    # neither refused call has an attempt or a ledger row.
    assert not ApprovalRequest.objects.exists()
    assert not StepAttempt.objects.filter(step__in=steps[1:]).exists()
    assert not ToolCall.objects.filter(step__in=steps[1:]).exists()
    # The token's grant is fixed on the session's run.
    assert [item["source"] for item in run.grants] == ["token"]


def test_the_projects_grant_filters_the_tool_list_too(asgi_server, bank, operator):
    project_grant_set(
        project_id=project_default().pk,
        actor=Actor.system("test"),
        grant={"tools": ["look*"]},
    )
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"

    async def scenario() -> list[str]:
        async with gateway_client(url, token) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert asyncio.run(scenario()) == ["lookup"]
