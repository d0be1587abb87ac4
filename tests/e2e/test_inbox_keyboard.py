"""A reviewer works the approvals inbox in a real browser: with the keyboard only (approve one
request, reject another with a reason), a rejection without a reason refused before anything
is sent, filters and the place kept after a decision, and cards that show the conversation
up to the call and why it waits without overflowing a phone's width.

Runs are created in the test process (Celery eager: they stop at their approval gate); the
pages come from daphne and Playwright drives Debian's chromium. Screenshots: /tmp/e2e-inbox-*.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus
from runs.control.create import run_create
from runs.models import Run
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, approve_confirmed, log_in
from testsupport.factories import make_run

pytestmark = [pytest.mark.long, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REASON = 'Wrong recipient — not <ops@example.com>; see ticket #42 & "refund" policy.'


def mail_run(user: Any, goal: str, to: str = "ops@example.com") -> ApprovalRequest:
    email = {"to": [to], "subject": goal, "body": "b"}
    run = make_run(user, goal=goal, steps=[{"tool": "send_email", "args": email}])
    return Run.objects.get(pk=run.pk).approvals.get()


def open_context(chromium: Browser, url: str, width: int = 1280) -> BrowserContext:
    context = chromium.new_context(base_url=url, viewport={"width": width, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    return context


def focused(page: Page) -> str:
    return str(
        page.evaluate(
            "() => { const e = document.activeElement;"
            " return (e.closest('[data-approval-id]') || {dataset: {}}).dataset.approvalId"
            " + ':' + (e.dataset.action || e.tagName.toLowerCase()); }"
        )
    )


def tab_to(page: Page, action: str) -> None:
    for _ in range(8):
        page.keyboard.press("Tab")
        if focused(page).endswith(f":{action}"):
            return
    raise AssertionError(f"Tab never reached {action}: at {focused(page)}")


def test_a_reviewer_approves_and_rejects_with_the_keyboard_only(
    asgi_server, operator, reviewer, chromium
):
    first = mail_run(operator, "mail the invoices")
    second = mail_run(operator, "mail the refunds")
    context = open_context(chromium, asgi_server.url)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    expect(page).to_have_title("(2) Approvals · agentops")
    expect(page.locator("[data-pending-badge]")).to_have_text("2")
    page.screenshot(path=SCREENSHOTS / "e2e-inbox-list.png")

    page.keyboard.press("?")
    expect(page.locator("#shortcuts-dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcuts-dialog")).to_be_hidden()

    # j focuses the first card, Enter opens it, a asks to confirm, Tab Enter approves.
    page.keyboard.press("j")
    assert focused(page) == f"{first.pk}:summary"
    page.keyboard.press("Enter")
    expect(page.locator(f"#card-{first.pk}")).to_have_attribute("open", "")
    # a asks to confirm as a click does: "Go back" has the focus, Tab reaches Approve.
    page.keyboard.press("a")
    expect(page.locator("#confirm-dialog")).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text("Approve send_email?")
    expect(page.locator("[data-confirm-cancel]")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("[data-confirm-ok]")).to_be_focused()
    expect(page.locator("[data-confirm-ok]")).to_have_text("Approve")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator(".message-success")).to_contain_text("Approved send_email")
    first.refresh_from_db()
    assert first.status == ApprovalStatus.APPROVED
    assert first.decisions.get().reviewer_name == "rita"

    # Back in the inbox, the next card has the focus. r goes to its reason field; shortcuts
    # typed there are text, not commands.
    expect(page).to_have_title("(1) Approvals · agentops")
    expect(page.locator(f"#summary-{second.pk}")).to_be_focused()
    page.keyboard.press("r")
    assert focused(page) == f"{second.pk}:textarea"
    page.keyboard.type("jk")
    assert focused(page) == f"{second.pk}:textarea"
    expect(page.locator(f"#comment-{second.pk}")).to_have_value("jk")
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")

    # Reject with an empty reason: refused in the page, nothing sent.
    tab_to(page, "reject")
    page.keyboard.press("Enter")
    expect(page.locator(f"#comment-error-{second.pk}")).to_be_visible()
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    assert focused(page) == f"{second.pk}:textarea"
    second.refresh_from_db()
    assert second.status == ApprovalStatus.PENDING

    page.keyboard.type(REASON)
    tab_to(page, "reject")
    page.keyboard.press("Enter")
    expect(page.locator("#confirm-dialog")).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "e2e-inbox-confirm-reject.png")
    page.keyboard.press("Tab")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator(".message-success")).to_contain_text("Rejected send_email")
    second.refresh_from_db()
    assert second.status == ApprovalStatus.REJECTED
    decision = second.decisions.get()
    assert (decision.reviewer_name, decision.decision, decision.comment) == (
        "rita",
        "reject",
        REASON,
    )
    assert Run.objects.get(pk=second.run_id).steps.get().error["reason"] == REASON
    expect(page).to_have_title("Approvals · agentops")
    context.close()


def test_an_empty_reason_is_refused_by_the_server_too(asgi_server, operator, reviewer, chromium):
    approval = mail_run(operator, "mail the invoices")
    context = open_context(chromium, asgi_server.url)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    page.locator(f"#summary-{approval.pk}").click()
    # A page whose script did not run (or a crafted post): the server refuses it.
    with page.expect_navigation():
        page.evaluate(
            """(id) => {
                const form = document.getElementById(`decide-${id}`);
                form.querySelector("[data-comment]").value = "   ";
                const decision = document.createElement("input");
                Object.assign(decision, { type: "hidden", name: "decision", value: "reject" });
                form.appendChild(decision);
                HTMLFormElement.prototype.submit.call(form);
            }""",
            approval.pk,
        )
    expect(page.locator(".message-error")).to_contain_text("give a reason")
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert not approval.decisions.exists()
    context.close()


def test_filters_and_the_place_survive_a_decision(asgi_server, operator, reviewer, chromium):
    mail_run(operator, "mail the refund policy")
    invoices = [mail_run(operator, f"mail the invoices of {month}") for month in ("May", "June")]
    context = open_context(chromium, asgi_server.url)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    page.fill("#filter-q", "invoices")
    page.select_option("#filter-sort", "newest")
    with page.expect_navigation():
        page.click(".inbox-filters button[type=submit]")
    cards = page.locator("[data-approval-id]")
    expect(cards).to_have_count(2)
    expect(cards.first).to_have_attribute("data-approval-id", str(invoices[1].pk))
    page.locator(f"#summary-{invoices[1].pk}").click()
    approve_confirmed(page, page.locator(f"#card-{invoices[1].pk}"))
    assert "q=invoices" in page.url
    assert "sort=newest" in page.url
    assert page.url.endswith(f"#approval-{invoices[0].pk}")
    expect(page.locator("[data-approval-id]")).to_have_count(1)
    expect(page.locator(f"#summary-{invoices[0].pk}")).to_be_focused()
    expect(page.locator("#filter-q")).to_have_value("invoices")
    context.close()


TRANSCRIPT_LONG = "x" * 300
TRANSCRIPT = [
    {"role": "user", "content": "Find my booking and mail the summary to ops."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_booking", "arguments": json.dumps({"id": "B1"})},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps({"booking": "B1", "token": TRANSCRIPT_LONG, "legs": [1, 2]}),
    },
    {
        "role": "assistant",
        "content": "Mailing the summary now.",
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {
                    "name": "send_email",
                    "arguments": json.dumps(
                        {"to": ["ops@example.com"], "subject": "B1", "body": TRANSCRIPT_LONG}
                    ),
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "sent"},
    {"role": "user", "content": "LATER MESSAGE: also cancel it."},
]


@pytest.mark.parametrize("width", [390, 1440])
def test_a_transcript_card_shows_the_call_in_context_without_overflow(
    asgi_server, operator, reviewer, chromium, width
):
    run = run_create(
        actor=Actor.for_user(operator), agent="transcript", goal="mail it", transcript=TRANSCRIPT
    )
    approval = Run.objects.get(pk=run.pk).approvals.get()
    context = open_context(chromium, asgi_server.url, width=width)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    page.locator(f"#summary-{approval.pk}").click()
    card = page.locator(f"#card-{approval.pk}")
    expect(card.locator("[data-approval-reason]")).to_contain_text("rule send_*: high risk")
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    conversation = card.locator("[data-approval-conversation]")
    expect(conversation).to_contain_text("Mailing the summary now.")
    expect(conversation).not_to_contain_text("LATER MESSAGE")
    # A recorded transcript keeps its calls as steps: each earlier call once, its arguments
    # beside its result.
    booking = card.locator(".earlier-steps li").first
    expect(booking).to_contain_text("get_booking")
    expect(booking.locator("[data-step-args]")).to_contain_text("B1")
    expect(booking.locator("[data-step-result]")).to_contain_text("legs")
    page.screenshot(path=SCREENSHOTS / f"e2e-inbox-card-{width}.png", full_page=True)
    too_wide = page.evaluate(
        """() => {
            const limit = document.documentElement.clientWidth;
            const wide = [...document.querySelectorAll("body *")].filter(
                (e) => e.getBoundingClientRect().right > limit + 0.5
            );
            return wide.map((e) => e.tagName + "." + e.className).slice(0, 5);
        }"""
    )
    assert too_wide == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()


def test_the_filtered_inbox_title_and_badge_update_live(asgi_server, operator, reviewer, chromium):
    mail_run(operator, "mail the invoices of May")
    context = open_context(chromium, asgi_server.url)
    page = context.new_page()
    log_in(page, "rita", "/approvals/?q=invoices")
    expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
    expect(page.locator("[data-approval-id]")).to_have_count(1)
    page.evaluate("window.__noReload = 1")
    june = mail_run(operator, "mail the invoices of June")
    mail_run(operator, "mail the refund policy")
    expect(page.locator("[data-approval-id]")).to_have_count(2)
    expect(page.locator(f'[data-approval-id="{june.pk}"]')).to_be_visible()
    expect(page).to_have_title("(3) Approvals · agentops")
    expect(page.locator("[data-pending-badge]")).to_have_text("3")
    assert page.evaluate("window.__noReload") == 1
    context.close()
