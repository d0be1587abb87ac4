"""A reviewer approves a risky step in a real browser and watches the run finish live.

Real processes throughout: daphne serves the pages and WebSockets, a Celery worker executes
the steps, and Playwright drives Debian's chromium (launched by path, not pytest-playwright's
downloaded browser). Screenshots go to /tmp/e2e-*.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from runs.control.create import run_create
from runs.models import Run, RunStatus
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, approve_confirmed, log_in

pytestmark = pytest.mark.e2e

EMAIL_ARGS = {"to": ["cfo@example.com"], "subject": "Q3 numbers", "body": "Total: 42"}
RATIONALE = "The user asked to mail the Q3 total to the CFO."


def test_reviewer_approves_and_the_run_finishes_without_reload(
    worker, asgi_server, operator, reviewer, chromium
):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="Mail the Q3 total to the CFO",
        steps=[
            {
                "tool": "calculate",
                "args": {"expression": "40+2"},
                "rationale": "Add up the quarter.",
            },
            {"tool": "send_email", "args": EMAIL_ARGS, "rationale": RATIONALE},
        ],
    )
    context = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)

    # Tab 1: the run's timeline. The worker moves it to awaiting_approval, live or before.
    timeline = context.new_page()
    log_in(timeline, "rita", f"/runs/{run.pk}/")
    expect(timeline.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
    expect(timeline.locator("[data-run-status]")).to_have_text("Awaiting approval")
    expect(timeline.locator('[data-step-index="1"]')).to_have_attribute(
        "data-step-status", "awaiting_approval"
    )
    timeline.evaluate("window.__noReload = 1")

    # A third tab keeps a copy of the request's form, as a stale tab would, for later.
    stale = context.new_page()
    stale.goto("/approvals/")
    approval_id = run.approvals.get().pk
    stale.evaluate(
        """(id) => {
            const form = document.getElementById(`decide-${id}`).cloneNode(true);
            form.id = "stale-form";
            document.body.appendChild(form);
        }""",
        approval_id,
    )

    # Tab 2: the inbox shows what the agent wants to do and why; the reviewer approves.
    inbox = context.new_page()
    inbox.goto("/approvals/")
    item = inbox.locator(f'[data-approval-id="{approval_id}"]')
    expect(item.locator("[data-approval-tool]")).to_have_text("send_email")
    item.locator("[data-card-summary]").click()
    expect(item.locator("[data-approval-args]")).to_contain_text("cfo@example.com")
    expect(item.locator("[data-approval-rationale]")).to_contain_text(RATIONALE)
    item.locator("details.context summary").click()
    expect(item.locator(".earlier-steps")).to_contain_text("42")
    item.locator("textarea[name=comment]").fill("Checked the figure, send it.")
    inbox.screenshot(path=SCREENSHOTS / "e2e-inbox.png", full_page=True)
    approve_confirmed(inbox, item)
    expect(inbox.locator(".message-success")).to_contain_text("Approved send_email")

    # Tab 1 follows the run to the end over its WebSocket, without reloading.
    expect(timeline.locator("[data-run-status]")).to_have_text("Succeeded")
    expect(timeline.locator('[data-step-index="1"]')).to_have_attribute(
        "data-step-status", "succeeded"
    )
    assert timeline.evaluate("window.__noReload") == 1
    timeline.screenshot(path=SCREENSHOTS / "e2e-run.png", full_page=True)
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED

    # The stale form posts a decision on a request that is no longer pending: a clear message.
    with stale.expect_navigation():
        stale.evaluate(
            """() => {
                const form = document.getElementById("stale-form");
                const decision = document.createElement("input");
                Object.assign(decision, { type: "hidden", name: "decision", value: "approve" });
                form.appendChild(decision);
                form.requestSubmit();
            }"""
        )
    expect(stale.locator(".message-error")).to_contain_text(
        "approval request is approved, not pending"
    )
    stale.screenshot(path=SCREENSHOTS / "e2e-stale.png", full_page=True)
    assert run.approvals.get().decisions.count() == 1

    stale.goto("/")
    listed = stale.locator(f'[data-run-id="{run.pk}"] [data-run-status]')
    # The list says the status's label; its code is the attribute.
    expect(listed).to_have_attribute("data-run-status", "succeeded")
    expect(listed).to_have_text("Succeeded")
    stale.screenshot(path=SCREENSHOTS / "e2e-runs.png", full_page=True)
    context.close()
