"""An operator compensates a failed run from its page in a real browser, confirms, and watches
the compensating step beside the step it undoes: waiting for its reviewer, then succeeded and
the run compensated, live (no reload)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

import tests.tools  # noqa: F401  (registers the test tools in this process too)
from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import Run, RunStatus
from tests.conftest import AsgiServer
from tests.e2e.conftest import logged_in_page
from tests.tools import EFFECTS
from testsupport.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(transactional_db, seeded, tmp_path) -> Iterator[AsgiServer]:
    """The web app with the test tools registered (``AGENTOPS_TOOL_MODULES``): it builds the
    compensating steps of their calls."""
    server = AsgiServer(tmp_path / "uvicorn.log", AGENTOPS_TOOL_MODULES="tests.tools")
    yield server
    server.stop()


def test_an_operator_compensates_a_failed_run_and_watches_it_live(
    server, operator, reviewer, chromium: Browser
):
    # Created and run in this process (eager tasks): it charges, then fails.
    run = make_run(
        operator,
        goal="charge, then fail",
        steps=[{"tool": "test_charge", "args": {"amount": 70}}, {"tool": "test_crash", "args": {}}],
    )
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    page = logged_in_page(chromium, server.url, "olivia", f"/runs/{run.pk}/")
    try:
        page.click("[data-action=compensate]")
        dialog = page.locator("#confirm-dialog")
        expect(page.locator("#confirm-text")).to_contain_text("Compensate this run?")
        with page.expect_navigation():
            dialog.locator("[data-confirm-ok]").click()
        expect(page.locator("[data-messages]")).to_contain_text("Compensating")
        charged = page.locator("#step-0")
        expect(charged.locator("[data-undone-by]")).to_have_attribute(
            "data-undo-status", "awaiting_approval"
        )
        expect(page.locator("#step-2 [data-undoes]")).to_have_text("undoes #0")
        expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
        page.evaluate("window.__noReload = 1")

        # A reviewer approves the refund elsewhere; the page follows without a reload.
        approval = ApprovalRequest.objects.get(step__run=run)
        approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")
        expect(charged.locator("[data-undone-by]")).to_have_attribute(
            "data-undo-status", "succeeded"
        )
        expect(page.locator("[data-run-status]")).to_have_attribute(
            "data-run-status", "compensated"
        )
        expect(page.locator("[data-tl-undoes='0']")).to_contain_text(re.compile(r"#2 test_refund"))
        assert page.evaluate("window.__noReload") == 1
        assert page.locator("[data-action=compensate]").count() == 0
    finally:
        page.context.close()
    refund = run.steps.get(index=2)
    assert EFFECTS[refund.idempotency_key] == [("test_refund", {"amount": 70})]
