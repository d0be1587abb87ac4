"""Cancel run asks first, in an accessible dialog: going back changes nothing; confirming
cancels the run. Playwright drives Debian's chromium against daphne."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from runs.control.create import run_create
from runs.models import Run, RunStatus
from tests.e2e.conftest import TIMEOUT_MS, log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_cancel_run_asks_to_confirm(asgi_server, operator, chromium):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="mail the invoices",
        steps=[{"tool": "send_email", "args": {"to": ["a@b.co"], "subject": "s", "body": "b"}}],
    )
    context = chromium.new_context(base_url=asgi_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "olivia", f"/runs/{run.pk}/")
    dialog = page.locator("#confirm-dialog")

    page.click("[data-action=cancel]")
    expect(dialog).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text("Cancel this run?")
    # The least destructive choice has the focus; the confirming button keeps the danger style.
    expect(dialog.locator("[data-confirm-cancel]")).to_be_focused()
    expect(dialog.locator("[data-confirm-ok]")).to_have_class(re.compile(r"\bbutton-danger\b"))
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.click("[data-action=cancel]")
    dialog.locator("[data-confirm-cancel]").click()
    expect(dialog).to_be_hidden()
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING

    page.fill("#cancel-reason", "wrong customer")
    page.click("[data-action=cancel]")
    with page.expect_navigation():
        dialog.locator("[data-confirm-ok]").click()
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    context.close()
