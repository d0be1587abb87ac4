"""An MCP session's timeline follows a reviewer's approval live, in a real browser.

An MCP client (its own thread and event loop) calls the destructive ``transfer`` tool through
the gateway served by a real daphne; the call waits. An operator watches the session's run
page; a reviewer, in another browser, edits the amount in the approvals inbox and approves.
Without a reload the run page shows the step succeeded with the upstream's answer, the client's
call returns that answer, and the upstream's own log shows exactly one transfer, with the
approved arguments. Screenshots go to /tmp/e2e-mcp-*.png.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation, TextContent
from playwright.sync_api import Browser, expect

from approvals.models import ApprovalRequest
from gateway.models import McpSession
from gateway.services import upstream_register
from runs.models import Run, Step
from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, approve_confirmed, log_in
from testsupport.factories import make_token

pytestmark = pytest.mark.e2e

REQUESTED = {"to": "B-22", "amount": 900}
APPROVED = {"to": "B-22", "amount": 90}
CLIENT = Implementation(name="teller-agent", version="2.1")


class McpCall(threading.Thread):
    """One MCP session through the gateway, in its own thread and event loop: initialize,
    then one ``tools/call``; its ``result`` (or the ``error`` it raised) when it ends."""

    def __init__(self, url: str, token: str, tool: str, args: dict[str, Any]) -> None:
        super().__init__(name="mcp-client", daemon=True)
        self.url, self.token, self.tool, self.args = url, token, tool, args
        self.result: CallToolResult | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = asyncio.run(self._call())
        except BaseException as exc:  # handed to the test, which fails with it
            self.error = exc

    async def _call(self) -> CallToolResult:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=120)
        transport = streamable_http_client(self.url, http_client=http)
        async with Client(transport, client_info=CLIENT) as client:
            return await asyncio.wait_for(client.call_tool(self.tool, self.args), 150)


def seen(log: Path) -> list[dict[str, Any]]:
    """The calls the upstream received, from its own log."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_mcp_sessions_timeline_follows_the_reviewers_approval_live(
    worker: Any, asgi_server: Any, operator: Any, reviewer: Any, chromium: Browser, tmp_path: Path
) -> None:
    upstream_log = tmp_path / "upstream.jsonl"
    command = f"{sys.executable} -m tests.gateway.upstream_server --log {upstream_log}"
    bank = upstream_register(name=f"bank-{tmp_path.name[-8:]}", command=command)
    call = McpCall(
        f"{asgi_server.url}/mcp/{bank.name}/", make_token(operator), "transfer", REQUESTED
    )
    call.start()

    # The session is a run; its transfer waits for a reviewer, unseen by the upstream.
    session = wait_for(lambda: McpSession.objects.select_related("run").first(), 60)
    run: Run = session.run
    approval = wait_for(lambda: ApprovalRequest.objects.filter(run=run, status="pending").first())
    step = Step.objects.get(run=run)
    assert (step.tool, step.args) == ("transfer", REQUESTED)
    assert call.is_alive()
    assert call.error is None
    assert seen(upstream_log) == []

    # The operator's browser: the run page, live, with the step waiting for approval.
    watching = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 900}
    )
    watching.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    timeline = watching.new_page()
    log_in(timeline, "olivia", f"/runs/{run.pk}/")
    card = timeline.locator(f'[data-step-index="{step.index}"]')
    expect(timeline.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
    expect(timeline.locator(".run-title h1")).to_have_text(
        f"MCP session of teller-agent through {bank.name}"
    )
    expect(timeline.locator(".run-header .facts")).to_contain_text(
        "MCP client (through the gateway)"
    )
    expect(card).to_have_attribute("data-step-status", "awaiting_approval")
    expect(card.locator(".tool")).to_have_text("transfer")
    expect(card.locator("[data-approval-status]")).to_have_attribute(
        "data-approval-status", "pending"
    )
    timeline.evaluate("window.__noReload = 1")
    timeline.screenshot(path=SCREENSHOTS / "e2e-mcp-waiting.png", full_page=True)

    # The reviewer's browser: the inbox shows the call; they lower the amount and approve.
    reviewing = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 900}
    )
    reviewing.set_default_timeout(TIMEOUT_MS)
    inbox = reviewing.new_page()
    log_in(inbox, "rita", "/approvals/")
    item = inbox.locator(f'[data-approval-id="{approval.pk}"]')
    expect(item.locator("[data-approval-tool]")).to_have_text("transfer")
    item.locator("[data-card-summary]").click()
    expect(item.locator("[data-approval-args]")).to_contain_text("amount: 900")
    item.locator("details.edit-args summary").click()
    item.locator("[data-approval-args-editor]").fill(json.dumps(APPROVED, indent=2))
    item.locator("textarea[name=comment]").fill("Ninety, not nine hundred.")
    approve_confirmed(inbox, item)
    expect(inbox.locator(".message-success")).to_contain_text("Approved transfer")

    # The operator's page follows over its WebSocket: the step succeeded with the upstream's
    # answer to the approved arguments.
    answer = json.dumps({"tool": "transfer", "args": APPROVED})
    expect(card).to_have_attribute("data-step-status", "succeeded")
    expect(card.locator("[data-approval-status]")).to_have_attribute(
        "data-approval-status", "approved"
    )
    expect(card.locator(".approval-summary")).to_contain_text("Ninety, not nine hundred.")
    expect(card.locator("[data-step-args]")).to_contain_text(re.compile(r"amount: 90(?!\d)"))
    # The answer (JSON text in the result's content) shown as the tree of that JSON.
    result = card.locator("[data-step-result]")
    expect(result.locator(".j-json")).to_have_count(1)
    expect(result.locator(".j-str", has_text='"transfer"')).to_have_count(1)
    expect(result).to_contain_text(re.compile(r"amount: 90(?!\d)"))
    expect(result).not_to_contain_text("isError: true")
    assert timeline.evaluate("window.__noReload") == 1
    timeline.screenshot(path=SCREENSHOTS / "e2e-mcp-approved.png", full_page=True)

    # The client's call returned the upstream's answer.
    call.join(60)
    assert not call.is_alive()
    assert call.error is None, call.error
    assert call.result is not None
    assert not call.result.is_error
    (block,) = call.result.content
    assert isinstance(block, TextContent)
    assert block.text == answer

    # The upstream, by its own log, received exactly one transfer: the approved one, under the
    # step's idempotency key.
    step.refresh_from_db()
    received = seen(upstream_log)
    assert [(c["tool"], c["args"]) for c in received] == [("transfer", APPROVED)]
    assert received[0]["meta"]["agentops/idempotency-key"] == step.idempotency_key
    assert (step.status, step.args) == ("succeeded", APPROVED)

    # The runs list shows the session's run with its agent kind's label.
    timeline.goto("/")
    row = timeline.locator(f'[data-run-id="{run.pk}"]')
    expect(row).to_contain_text("MCP client (through the gateway)")
    expect(row.locator("[data-steps]")).to_have_text("1/1")
    reviewing.close()
    watching.close()
