"""A link to an approval request opens that request, wherever it sits in the inbox, and never
lets a shortcut act on another; a failed edit keeps the reviewer's text. Playwright drives
Debian's chromium against daphne. Screenshots: /tmp/e2e-approval-*."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.views import INBOX_PER_PAGE
from tests.e2e.conftest import SCREENSHOTS, approve_confirmed, logged_in_page
from tests.e2e.test_inbox_keyboard import mail_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_link_to_a_request_on_inbox_page_5_opens_that_request(
    asgi_server, operator, reviewer, chromium
):
    approvals = [mail_run(operator, f"mail report {n}") for n in range(4 * INBOX_PER_PAGE + 1)]
    wanted = approvals[-1]  # the oldest first: alone on page 5
    page = logged_in_page(chromium, asgi_server.url, "rita", f"/approvals/{wanted.pk}/")
    expect(page.locator(f'[data-approval-id="{wanted.pk}"]')).to_be_visible()
    expect(page.locator("h1")).to_contain_text(f"approval request #{wanted.pk}")
    expect(page.locator("[data-approval-conversation]")).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "e2e-approval-page.png", full_page=True)
    # The decision bar stays in view while the page scrolls.
    page.mouse.wheel(0, -5000)
    expect(page.locator("[data-decision-bar]")).to_be_in_viewport()
    # The a shortcut acts on this request, and only after confirming.
    page.keyboard.press("a")
    expect(page.locator("#confirm-text")).to_contain_text("Approve send_email?")
    page.keyboard.press("Tab")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator(".message-success")).to_contain_text("Approved send_email")
    assert page.url.endswith(f"/approvals/{wanted.pk}/")
    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert statuses.pop(wanted.pk) == ApprovalStatus.APPROVED
    assert set(statuses.values()) == {ApprovalStatus.PENDING}
    page.context.close()


def test_an_old_inbox_link_to_a_request_on_another_page_focuses_none(
    asgi_server, operator, reviewer, chromium
):
    approvals = [mail_run(operator, f"mail report {n}") for n in range(INBOX_PER_PAGE + 1)]
    wanted = approvals[-1]  # on page 2
    page = logged_in_page(chromium, asgi_server.url, "rita", "/")
    page.goto(f"/approvals/#approval-{wanted.pk}")
    notice = page.locator("[data-missing-request]")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(f"Request #{wanted.pk} is not on this page")
    # No card has the focus: a does nothing.
    page.keyboard.press("a")
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    assert page.evaluate("document.activeElement.closest('[data-approval-id]')") is None
    with page.expect_navigation():
        notice.get_by_role("link").click()
    assert page.url.endswith(f"/approvals/{wanted.pk}/")
    assert not ApprovalRequest.objects.exclude(status=ApprovalStatus.PENDING).exists()
    page.context.close()


BAD = '{"to": ["ops@example.com"], "subject": "kept", "body": "b",}'
OFF_SCHEMA = json.dumps({"to": "ops@example.com", "subject": "kept", "body": "b"})


def test_a_failed_edit_keeps_the_reviewers_text(asgi_server, operator, reviewer, chromium):
    approval = mail_run(operator, "mail the invoices")
    page = logged_in_page(chromium, asgi_server.url, "rita", "/approvals/")
    card = page.locator(f'[data-approval-id="{approval.pk}"]')
    card.locator("[data-card-summary]").click()
    card.locator("details.edit-args summary").click()
    card.locator("[data-approval-args-editor]").fill(BAD)
    card.locator("[data-comment]").fill("fixing the list")
    approve_confirmed(page, card)
    expect(page.locator(".message-error")).to_contain_text("not JSON")
    # Back on the inbox: the card open, the editor open, the text as typed.
    editor = card.locator("[data-approval-args-editor]")
    expect(editor).to_be_visible()
    expect(editor).to_have_value(BAD)
    expect(card.locator("[data-comment]")).to_have_value("fixing the list")
    page.screenshot(path=SCREENSHOTS / "e2e-approval-failed-edit.png", full_page=True)

    # On the request's page, a schema error keeps the text too.
    page.goto(f"/approvals/{approval.pk}/")
    page.locator("details.edit-args summary").click()
    page.locator("[data-approval-args-editor]").fill(OFF_SCHEMA)
    approve_confirmed(page, page.locator("[data-approval-page]"))
    expect(page.locator(".message-error")).to_contain_text("args")
    expect(page.locator("[data-approval-args-editor]")).to_have_value(OFF_SCHEMA)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert approval.step.args["to"] == ["ops@example.com"]
    page.context.close()
