"""The runs list in a real browser: column sort, a saved view, a search for a reservation id
found only in a call's arguments, pages that stay put while new runs arrive, the browser's
time zone shown and used by the date filters, status labels, and the inbox's opt-in
notifications of new requests."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, BrowserContext, Page, expect

from runs.models import Run
from tests.e2e.conftest import TIMEOUT_MS, log_in, wait_until
from tests.e2e.test_inbox_keyboard import mail_run
from testsupport.fleet import CALCULATE, at, create_run_at

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RESERVATION = "ZFA04Y"


def context_of(chromium: Browser, url: str, **options: Any) -> BrowserContext:
    context = chromium.new_context(base_url=url, viewport={"width": 1280, "height": 900}, **options)
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    return context


def page_as(chromium: Browser, url: str, username: str, next_url: str, **options: Any) -> Page:
    page = context_of(chromium, url, **options).new_page()
    log_in(page, username, next_url)
    return page


def listed(page: Page) -> list[str]:
    return page.locator("[data-run-id]").evaluate_all("rows => rows.map(r => r.dataset.runId)")


def test_sort_search_and_a_saved_view(asgi_server, operator, chromium):
    runs = []
    for day, tokens in ((1, 300), (2, 100), (3, 200)):
        run = create_run_at(operator, f"Run of day {day}", [CALCULATE], at(day))
        Run.objects.filter(pk=run.pk).update(usage_tokens=tokens * 1000)
        runs.append(str(run.pk))
    booking = create_run_at(
        operator,
        "Change the flight",
        [{"tool": "send_email", "args": {"to": ["a@b.co"], "subject": RESERVATION, "body": ""}}],
        at(4),
    )
    page = page_as(chromium, asgi_server.url, "olivia", "/")
    expect(page.locator(f'[data-run-id="{booking.pk}"] [data-run-status]')).to_have_text(
        "Awaiting approval"
    )
    expect(page.locator(f'[data-run-id="{runs[0]}"] [data-tokens]')).to_have_text("300,000")

    with page.expect_navigation():
        page.locator("[data-sort=tokens]").click()
    expect(page.locator("th[aria-sort]")).to_have_attribute("aria-sort", "descending")
    assert listed(page)[:3] == [runs[0], runs[2], runs[1]]
    with page.expect_navigation():
        page.locator("[data-sort=tokens]").click()
    expect(page.locator("th[aria-sort]")).to_have_attribute("aria-sort", "ascending")
    assert listed(page)[1:] == [runs[1], runs[2], runs[0]]

    page.fill("[data-run-search]", RESERVATION.lower())
    with page.expect_navigation():
        page.locator("[data-run-filters] button[type=submit]").click()
    expect(page.locator("[data-run-id]")).to_have_count(1)
    assert listed(page) == [str(booking.pk)]

    page.fill("[data-save-view] input[name=name]", "Bookings")
    with page.expect_navigation():
        page.locator("[data-save-view] button[type=submit]").click()
    expect(page.locator(".message-success")).to_contain_text("Saved the view")
    with page.expect_navigation():
        page.goto("/")
    expect(page.locator("[data-run-id]")).to_have_count(4)
    with page.expect_navigation():
        page.locator("[data-saved-view=Bookings] a").click()
    assert listed(page) == [str(booking.pk)]
    expect(page.locator("[data-run-search]")).to_have_value(RESERVATION.lower())
    page.context.close()


def test_pages_stay_put_while_new_runs_arrive(asgi_server, operator, chromium):
    for n in range(55):
        create_run_at(operator, f"Older run {n}", [CALCULATE], at(1 + n % 27, 1 + n % 20))
    page = page_as(chromium, asgi_server.url, "olivia", "/")
    expect(page.locator("[data-run-id]")).to_have_count(50)
    with page.expect_navigation():
        page.locator("[data-page-after]").click()
    expect(page.locator("[data-run-id]")).to_have_count(5)
    second = listed(page)
    # Created after the list was opened, as new runs are: the newest of all.
    for n in range(3):
        create_run_at(operator, f"New run {n}", [CALCULATE], timezone.now())
    # The live region refreshes on the new runs' events; the page keeps its rows.
    page.reload()
    expect(page.locator("[data-run-id]")).to_have_count(5)
    assert listed(page) == second
    with page.expect_navigation():
        page.locator("[data-page-before]").click()
    expect(page.locator("[data-run-id]")).to_have_count(50)
    assert not page.get_by_text("New run 0").count()
    page.context.close()


def test_the_browsers_zone_is_shown_and_used_by_the_date_filters(asgi_server, operator, chromium):
    early = create_run_at(operator, "At ten UTC", [CALCULATE], at(10, 10))
    late = create_run_at(operator, "At noon UTC", [CALCULATE], at(10, 12))
    page = page_as(chromium, asgi_server.url, "olivia", "/", timezone_id="Asia/Tokyo")
    expect(page.locator("[data-zone-name]")).to_have_text("Asia/Tokyo")
    # 10:00 UTC is 19:00 in Tokyo.
    expect(page.locator(f'[data-run-id="{early.pk}"] [data-created] time')).to_contain_text(
        "2026-01-10 19:00"
    )
    assert "Times are UTC" not in page.content()
    # 20:30 in Tokyo is 11:30 UTC: only the noon run is later.
    page.fill("input[name=created_from]", "2026-01-10T20:30")
    with page.expect_navigation():
        page.locator("[data-run-filters] button[type=submit]").click()
    assert re.search(r"tz=Asia%2FTokyo", page.url)
    assert listed(page) == [str(late.pk)]
    expect(page.locator("input[name=created_from]")).to_have_value("2026-01-10T20:30")
    page.context.close()


# Records each Notification the page creates (headless Chromium shows none).
_RECORD_NOTIFICATIONS = """
window.__notes = [];
const Real = window.Notification;
class Recorded extends Real {
  constructor(title, options) { super(title, options); window.__notes.push(title); }
}
Object.defineProperty(window, "Notification", { value: Recorded });
"""


def test_a_reviewer_opts_in_to_notifications_of_new_requests(
    asgi_server, operator, reviewer, chromium
):
    context = context_of(chromium, asgi_server.url)
    context.grant_permissions(["notifications"], origin=asgi_server.url)
    context.add_init_script(_RECORD_NOTIFICATIONS)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    toggle = page.locator("[data-notify-toggle]")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    mail_run(operator, "mail before opting in")
    expect(page.locator("[data-approval-id]")).to_have_count(1)
    assert page.evaluate("window.__notes") == []
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    approval = mail_run(operator, "mail after opting in")
    wait_until(page, "window.__notes.length === 1")
    assert page.evaluate("window.__notes") == [f"New approval request #{approval.pk}"]
    # Opting out stops them, and the choice is kept across reloads.
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    page.reload()
    expect(page.locator("[data-notify-toggle]")).to_have_attribute("aria-pressed", "false")
    context.close()
