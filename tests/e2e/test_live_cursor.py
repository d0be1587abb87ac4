"""The browser's live pages resume from the server's cursor, not from the newest event id
they saw: while an event with a smaller id is still uncommitted, the page's cursor stays
before it, so a reconnect would replay it."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from projects.roles import Role
from runs.control.create import run_create
from tests.e2e.conftest import TIMEOUT_MS, log_in
from testsupport.factories import make_user
from testsupport.open_transactions import OpenTransaction

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_runs_list_keeps_its_cursor_before_an_uncommitted_event(seeded, asgi_server, chromium):
    olivia = make_user("olivia", Role.OPERATOR)
    run = run_create(
        actor=Actor.for_user(olivia),
        agent="plan",
        goal="live cursor",
        steps=[{"tool": "calculate", "args": {"expression": "1+1"}}],
    )
    context = chromium.new_context(base_url=asgi_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    frames: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(json.loads(f))))
    log_in(page, "olivia", "/")
    expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
    region = page.locator("#live-region")
    start = region.get_attribute("data-last-event-id")

    slow, fast = (
        OpenTransaction(project_id=run.project_id),
        OpenTransaction(project_id=run.project_id),
    )
    try:
        slow.begin()
        fast.begin()
        smaller = slow.record()
        larger = fast.record()
        assert smaller < larger
        fast.commit()
        deadline = time.monotonic() + 10
        while not any(f.get("event", {}).get("id") == larger for f in frames):
            assert time.monotonic() < deadline, frames
            page.wait_for_timeout(100)
        page.wait_for_timeout(1000)  # the server's catch-ups run meanwhile
        expect(region).to_have_attribute("data-last-event-id", start or "0")
        slow.commit()
        expect(region).to_have_attribute("data-last-event-id", str(larger))
    finally:
        slow.abort()
        fast.abort()
        context.close()
