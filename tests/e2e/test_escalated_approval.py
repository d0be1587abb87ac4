"""A member of the escalation group sees a request in their inbox that they may not decide yet,
and after beat escalates it to their group, approves it in a real browser.

daphne serves the pages; Playwright drives Debian's chromium. The escalation is beat's task
run in the test process. Screenshots go to /tmp/e2e-escalated-*.png.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from playwright.sync_api import expect

from approvals import tasks
from approvals.models import ApprovalRequest, ApprovalStatus, RiskRule
from projects.roles import Role
from runs.models import StepStatus
from tests.approvals.conftest import client_step, group_of
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, approve_confirmed, log_in
from testsupport.factories import make_user

pytestmark = pytest.mark.e2e


def test_a_manager_approves_an_escalated_request_in_the_inbox(
    transactional_db,
    asgi_server,
    operator,
    second_reviewer,
    chromium,
    django_capture_on_commit_callbacks,
):
    erin = make_user("erin", Role.REVIEWER)
    RiskRule.objects.create(
        pattern="refund_*",
        condition="amount > 500",
        risk="high",
        priority=1,
        description="refund over $500",
        approvers=group_of("finance", second_reviewer),
        ttl_seconds=3600,
        escalate_after_seconds=1800,
        escalation_group=group_of("managers", erin),
    )
    run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 6000}
    )
    approval = ApprovalRequest.objects.get(step=step)

    context = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "erin", "/approvals/")
    card = page.locator(f'[data-approval-id="{approval.pk}"]')
    card.locator("[data-card-summary]").click()
    expect(card.locator("[data-refusal]")).to_contain_text("until it escalates to")
    expect(card.locator("[data-action=approve]")).to_have_count(0)

    ApprovalRequest.objects.filter(pk=approval.pk).update(
        escalate_at=timezone.now() - timedelta(seconds=1)
    )
    assert tasks.notify_due()["escalated"] == 1
    assert [m.to for m in mail.outbox if "Escalated" in m.subject] == [["erin@example.com"]]

    page.reload()
    card.locator("[data-card-summary]").click()
    expect(card.locator("[data-approval-escalated]")).to_contain_text("to managers")
    expect(card.locator("[data-refusal]")).to_have_count(0)
    card.locator("textarea[name=comment]").fill("Finance is out; approved as manager.")
    page.screenshot(path=SCREENSHOTS / "e2e-escalated-inbox.png", full_page=True)
    approve_confirmed(page, card)
    expect(page.locator(".message-success")).to_contain_text("Approved refund_payment")
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decisions.get().reviewer == erin
    assert run.steps.get().status == StepStatus.READY
    context.close()
