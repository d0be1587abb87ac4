"""A reviewer sees a gated memory write as a diff in a real browser and approves it: the
card shows the item as stored now beside the proposed one and the changed field; approved,
a real worker writes it with the run as its provenance."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from approvals.models import RiskRule
from memory.models import MemoryItem
from memory.services import memory_put
from projects.services import project_default
from runs.control.create import run_create
from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS, approve_confirmed, logged_in_page

pytestmark = pytest.mark.e2e

POLICY = ["policies", "refunds"]


def test_a_reviewer_sees_the_memory_write_as_a_diff_and_approves_it(
    worker, asgi_server, operator, reviewer, chromium
):
    RiskRule.objects.create(
        pattern="memory.*", condition='namespace[0] == "policies"', risk="high", priority=5
    )
    memory_put(
        actor=Actor.system("seed"),
        project=project_default(),
        namespace=POLICY,
        key="limit",
        value={"max_refund_usd": 100, "currency": "USD"},
    )
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="Remember the new refund limit",
        steps=[
            {
                "tool": "memory.put",
                "args": {
                    "namespace": POLICY,
                    "key": "limit",
                    "value": {"max_refund_usd": 5000, "currency": "USD"},
                },
                "rationale": "The customer said the limit is now 5000.",
            }
        ],
    )
    wait_for(lambda: run.approvals.exists())
    approval = run.approvals.get()
    page = logged_in_page(chromium, asgi_server.url, "rita", "/approvals/")
    item = page.locator(f'[data-approval-id="{approval.pk}"]')
    expect(item.locator("[data-approval-tool]")).to_have_text("memory.put")
    item.locator("[data-card-summary]").click()
    proposal = item.locator("[data-memory-proposal]")
    expect(proposal.locator("[data-memory-current]")).to_contain_text("100")
    expect(proposal.locator("[data-memory-proposed]")).to_contain_text("5000")
    changed = proposal.locator('[data-diff-path="/max_refund_usd"]')
    expect(changed).to_have_attribute("data-diff-kind", "changed")
    expect(proposal.locator('[data-diff-path="/currency"]')).to_have_count(0)
    page.screenshot(path=SCREENSHOTS / "e2e-memory-diff.png", full_page=True)
    approve_confirmed(page, item)
    expect(page.locator(".message-success")).to_contain_text("Approved memory.put")
    wait_for(lambda: MemoryItem.objects.get(key="limit").version == 2)
    written = MemoryItem.objects.get(key="limit")
    assert written.value == {"max_refund_usd": 5000, "currency": "USD"}
    assert written.run_id == run.pk
    page.context.close()
