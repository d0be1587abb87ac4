"""An upstream tool's ``outputSchema`` (MCP 2025-06-18) validates its ``structuredContent``
through the gateway, driven by the ``mcp`` SDK's client: a conforming answer goes to the
client as it is; one that does not conform (or has no ``structuredContent``) fails the step
with ``validation_failed``, the client gets ``isError`` with the reason, the ledger keeps the
upstream's answer as ``invalid``, and the upstream was called once (read from its own log)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp.types import CallToolResult

from gateway.calls import output_failure
from gateway.models import McpSession
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall
from tests.gateway.conftest import gateway_client, seen, text
from testsupport.factories import make_token

pytestmark = [pytest.mark.django_db(transaction=True)]


def quotes(asgi_server: Any, bank: Any, operator: Any, *prices: Any) -> list[CallToolResult]:
    """The answers to ``quote`` called at each of ``prices`` in one session (listed first,
    as a client does, so the SDK knows the tool's output schema)."""
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    token = make_token(operator)

    async def scenario() -> list[CallToolResult]:
        async with gateway_client(url, token) as client:
            listed = await client.list_tools()
            (quote,) = [t for t in listed.tools if t.name == "quote"]
            assert quote.output_schema is not None
            assert quote.output_schema["required"] == ["price"]
            return [await client.call_tool("quote", {"price": price}) for price in prices]

    return asyncio.run(scenario())


def session_steps() -> tuple[Run, list[Step]]:
    run = Run.objects.get(pk=McpSession.objects.get().run_id)
    return run, list(Step.objects.filter(run=run).order_by("index"))


def test_a_result_that_fails_the_output_schema_fails_its_step(
    asgi_server, bank, upstream_log, operator
):
    good, bad = quotes(asgi_server, bank, operator, 5, -1)
    assert not good.is_error
    assert good.structured_content == {"price": 5}
    assert bad.is_error
    assert "the result failed outputSchema" in text(bad)
    assert "(at price)" in text(bad)
    assert [c["args"] for c in seen(upstream_log)] == [{"price": 5}, {"price": -1}]
    run, (good_step, bad_step) = session_steps()
    assert good_step.status == StepStatus.SUCCEEDED
    assert (bad_step.status, bad_step.attempts) == (StepStatus.FAILED, 1)
    assert (bad_step.error["type"], bad_step.error["rule"], bad_step.error["path"]) == (
        "validation_failed",
        "outputSchema",
        "price",
    )
    assert run.status == RunStatus.FAILED
    # Sent as the SDK's own call_tool sends it: the step's idempotency key in _meta.
    keys = [c["meta"]["agentops/idempotency-key"] for c in seen(upstream_log)]
    assert keys == [good_step.idempotency_key, bad_step.idempotency_key]
    call = ToolCall.objects.get(idempotency_key=bad_step.idempotency_key)
    assert call.status == "invalid"
    assert call.result["structuredContent"] == {"price": -1}


def test_a_result_without_structured_content_fails_a_tool_that_declares_a_schema(
    asgi_server, bank, upstream_log, operator
):
    (missing,) = quotes(asgi_server, bank, operator, None)
    assert missing.is_error
    assert "no structuredContent" in text(missing)
    _run, (step,) = session_steps()
    assert (step.status, step.error["type"]) == (StepStatus.FAILED, "validation_failed")
    assert len(seen(upstream_log)) == 1


@pytest.mark.parametrize(
    ("schema", "answer", "found"),
    [
        (None, {"content": []}, None),
        ({"type": "object"}, {"structuredContent": {"a": 1}}, None),
        ({"required": ["a"]}, {"structuredContent": {}}, "(root)"),
        ({"properties": {"a": {"type": "string"}}}, {"structuredContent": {"a": 1}}, "a"),
        ({"type": 5}, {"structuredContent": {}}, "(root)"),
        ("object", {"structuredContent": {}}, "(root)"),
    ],
)
def test_output_failure_checks_structured_content_against_the_schema(schema, answer, found):
    spec = {"name": "quote"} if schema is None else {"name": "quote", "outputSchema": schema}
    failure = output_failure(spec, answer)
    assert (failure["path"] if failure else None) == found
    if failure:
        assert (failure["type"], failure["rule"]) == ("validation_failed", "outputSchema")
