"""A reviewer edits a transfer's amount in the inbox into one that needs two approvals, in a
real browser: the inbox says the approval starts over and that theirs does not count, and
their card then tells them why they may not decide it.

daphne serves the pages; Playwright drives Debian's chromium. Screenshot:
/tmp/e2e-edit-reclassified.png.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.approvals.conftest import client_step, transfer_rules
from tests.e2e.conftest import SCREENSHOTS, approve_confirmed, logged_in_page

pytestmark = pytest.mark.e2e


def test_an_edit_that_needs_a_stricter_approval_starts_it_over_in_the_inbox(
    transactional_db,
    asgi_server,
    operator,
    reviewer,
    chromium,
    django_capture_on_commit_callbacks,
):
    # The rules' new version reaches the server's cache (tests.conftest.CHILD_CACHE_PREFIX), so
    # that the server, which classifies the edit, reads them again.
    transfer_rules()
    _, step = client_step(
        operator, django_capture_on_commit_callbacks, "transfer_funds", {"amount": 5}
    )
    approval = ApprovalRequest.objects.get(step=step)
    page = logged_in_page(chromium, asgi_server.url, "rita", "/approvals/")
    card = page.locator(f'[data-approval-id="{approval.pk}"]')
    card.locator("[data-card-summary]").click()
    card.locator("details.edit-args summary").click()
    card.locator("[data-approval-args-editor]").fill(json.dumps({"amount": 5_000_000}))
    approve_confirmed(page, card)
    expect(page.locator("li.message-warning")).to_contain_text(
        "needs a stricter approval (critical risk, 2 approvals)"
    )
    card.locator("[data-card-summary]").click()
    expect(card.locator("[data-approval-risk]")).to_have_text("critical risk")
    expect(card.locator("[data-refusal]")).to_contain_text("You edited these arguments")
    expect(card.locator("[data-action=approve]")).to_have_count(0)
    expect(card).to_contain_text("0 of 2 needed")
    page.screenshot(path=SCREENSHOTS / "e2e-edit-reclassified.png", full_page=True)
    approval.refresh_from_db()
    assert (approval.status, approval.required_approvals) == (ApprovalStatus.PENDING, 2)
    assert list(approval.decisions.all()) == []
    page.context.close()
