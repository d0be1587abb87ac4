"""A reviewer rejects 20 identical requests at once, in a real browser: grouped from one line,
selected together, rejected with one comment (each through the same rules, each audited),
the other requests left pending. Screenshot: /tmp/e2e-inbox-bulk.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalStatus
from audit.models import AuditEvent
from tests.e2e.conftest import SCREENSHOTS, logged_in_page
from tests.e2e.test_inbox_keyboard import mail_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

COMMENT = "Twenty copies of one mail: the agent looped."


def test_a_reviewer_rejects_20_grouped_requests_with_a_comment(
    asgi_server, operator, reviewer, chromium
):
    others = [
        mail_run(operator, "mail the refund policy", to=f"p{n}@example.com") for n in range(2)
    ]
    copies = [mail_run(operator, "mail the weekly report") for _ in range(20)]
    page = logged_in_page(chromium, asgi_server.url, "rita", "/approvals/")
    first = page.locator(f"#approval-{copies[0].pk}")
    expect(first.locator("[data-identical]")).to_have_text("20 identical")
    expect(first.locator("[data-key-args]")).to_contain_text("to=ops@example.com")
    first.locator("[data-card-summary]").click()
    with page.expect_navigation():
        first.locator("[data-identical-link]").click()
    expect(page.locator("[data-approval-id]")).to_have_count(20)

    bulk = page.locator("[data-bulk-form]")
    bulk.locator("[data-select-all]").check()
    expect(bulk.locator("[data-selected-count]")).to_have_text("20 selected")
    # Without a comment the rejection is refused in the page: nothing asked, nothing sent.
    bulk.locator("[data-bulk-action=reject]").click()
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    expect(bulk.locator("[data-bulk-comment]")).to_be_focused()

    bulk.locator("[data-bulk-comment]").fill(COMMENT)
    bulk.locator("[data-bulk-action=reject]").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "e2e-inbox-bulk.png")
    with page.expect_navigation():
        dialog.locator("[data-confirm-ok]").click()
    expect(page.locator(".message-success")).to_contain_text("Rejected 20 requests.")
    ids = [a.pk for a in copies]
    for approval in ApprovalRequest.objects.filter(pk__in=ids):
        assert approval.status == ApprovalStatus.REJECTED
        assert approval.decisions.get().comment == COMMENT
    rejected = AuditEvent.objects.filter(verb="approval.rejected", object_id__in=map(str, ids))
    assert rejected.count() == 20
    for other in others:
        other.refresh_from_db()
        assert other.status == ApprovalStatus.PENDING
    page.context.close()
