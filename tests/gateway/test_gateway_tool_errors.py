"""An upstream's ``isError`` result through the gateway: the client gets it as it is, and the
call's step completes (the run goes on) marked a tool error; a normal result is not marked."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentops.actors import Actor
from approvals.services import approval_decide
from audit.models import AuditEvent
from gateway.models import McpSession
from runs.models import Run, Step, ToolCall
from tests.gateway.conftest import gateway_client, seen, text
from tests.gateway.test_gateway import wait_for_approval
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.django_db(transaction=True)]

REFUSAL = "Error: a transfer cannot be negative"


def test_an_is_error_result_marks_the_step_a_tool_error(asgi_server, bank, upstream_log, operator):
    reviewer = make_user("rita-te", "reviewer")
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    token = make_token(operator)

    async def scenario() -> None:
        async with gateway_client(url, token) as client:
            call = asyncio.ensure_future(client.call_tool("transfer", {"to": "B", "amount": -5}))
            approval = await asyncio.to_thread(wait_for_approval)
            await asyncio.to_thread(
                approval_decide,
                approval_id=approval.pk,
                actor=Actor.for_user(reviewer),
                decision="approve",
                comment="let it try",
            )
            refused = await asyncio.wait_for(call, 30)
            assert refused.is_error
            assert text(refused) == REFUSAL
            # The session goes on: the next call is forwarded and answered.
            looked = await client.call_tool("lookup", {"account": "A-1"})
            assert not looked.is_error
            assert json.loads(text(looked)) == {"tool": "lookup", "args": {"account": "A-1"}}

    asyncio.run(scenario())
    assert [c["tool"] for c in seen(upstream_log)] == ["transfer", "lookup"]
    run = Run.objects.get(pk=McpSession.objects.get().run_id)
    assert run.status == "succeeded"
    transfer, lookup = Step.objects.filter(run=run).order_by("index")
    assert (transfer.status, transfer.tool_error) == ("succeeded", True)
    assert transfer.result["isError"] is True
    assert transfer.result["content"][0]["text"] == REFUSAL
    assert (lookup.status, lookup.tool_error) == ("succeeded", False)
    assert ToolCall.objects.get(step=transfer).report["is_error"] is True
    assert "is_error" not in ToolCall.objects.get(step=lookup).report
    succeeded = {
        e.object_id: e.payload
        for e in AuditEvent.objects.filter(run_id=run.pk, verb="step.succeeded")
    }
    assert succeeded[str(transfer.pk)]["tool_error"] is True
    assert "tool_error" not in succeeded[str(lookup.pk)]
