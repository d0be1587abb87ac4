"""``wait_until`` waits for a condition that becomes true later on a page of the app, under its
Content Security Policy, where Playwright's ``wait_for_function`` fails as soon as it has to poll
(a notification test failed so on a loaded CI host)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Error

from tests.e2e.conftest import log_in, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_condition_that_becomes_true_later_is_awaited_under_the_csp(
    asgi_server, operator, chromium
):
    page = chromium.new_page(base_url=asgi_server.url)
    log_in(page, "olivia", "/")
    page.evaluate("setTimeout(() => { window.ready = 1; }, 300)")
    wait_until(page, "window.ready === 1")
    page.evaluate("window.later = 0; setTimeout(() => { window.later = 1; }, 300)")
    with pytest.raises(Error, match="unsafe-eval"):
        page.wait_for_function("window.later === 1", timeout=5_000)
