"""Real-browser fixtures: Playwright driving Debian's chromium (launched by path, not
pytest-playwright's downloaded browser), and logging in through the login page."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

from testsupport.factories import PASSWORD

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 30_000
SCREENSHOTS = Path("/tmp")  # noqa: S108  (the brief asks for /tmp/e2e-*.png)


@pytest.fixture
def chromium(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still plain synchronous code, so Django's async-safety guard must not refuse them.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        # Playwright's greenlets give the test's ORM calls their own connection context: close
        # its connections here, or the test database cannot be dropped at the end.
        connections.close_all()
        browser.close()


def logged_in_page(chromium: Browser, base_url: str, username: str, next_url: str) -> Page:
    """A page of a new 1280x900 browser context on ``base_url``, logged in as ``username``
    and at ``next_url``; close it with ``page.context.close()``."""
    context = chromium.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    log_in(page, username, next_url)
    return page


def log_in(page: Page, username: str, next_url: str) -> None:
    page.goto(f"/accounts/login/?next={next_url}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.click("button[type=submit]")


def approve_confirmed(page: Page, within: Locator) -> None:
    """Click the Approve button in ``within`` (a card or a request's page), check that the
    confirmation asks (its confirming button in the primary style, the focus on "Go back"),
    confirm, and wait for the page the decision returns to."""
    within.locator("[data-action=approve]").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("[data-confirm-cancel]")).to_be_focused()
    expect(dialog.locator("[data-confirm-ok]")).to_have_class(re.compile(r"\bbutton-primary\b"))
    with page.expect_navigation():
        dialog.locator("[data-confirm-ok]").click()


def wait_until(page: Page, expression: str, arg: Any = None) -> None:
    """Wait until ``expression`` (a JavaScript expression, or a function of ``arg``) is truthy
    in ``page``, checking it with ``page.evaluate`` every 100 ms for up to ``TIMEOUT_MS``.

    Playwright's ``wait_for_function`` polls by evaluating the expression as a string in the
    page, which the app's Content Security Policy (no ``'unsafe-eval'``) refuses: it only ever
    passed when its first check was already true.

    Raises:
        AssertionError: still falsy after ``TIMEOUT_MS``.
    """
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {TIMEOUT_MS} ms: {expression}")
        page.wait_for_timeout(100)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``screenshots`` (they write the README's images) run only when a ``-m``
    expression names that marker; any other run leaves them out (deselected)."""
    if "screenshots" in (config.getoption("markexpr") or ""):
        return
    left_out = [item for item in items if item.get_closest_marker("screenshots")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("screenshots")]
