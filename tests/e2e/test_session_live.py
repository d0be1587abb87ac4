"""A session's page in a real browser updates live while a client agent writes the session's
state and adds items over the API (no reload), and a state version's diff opens."""

from __future__ import annotations

import pytest
from agentops_client import Client
from playwright.sync_api import expect

from projects.roles import Role
from tests.e2e.conftest import TIMEOUT_MS, log_in
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_session_page_follows_a_client_agent(seeded, asgi_server, chromium):
    make_user("olivia", Role.OPERATOR)
    agent = Client(asgi_server.url, make_token(make_user("agent", Role.OPERATOR)), websocket=False)
    context = chromium.new_context(base_url=asgi_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    try:
        session = agent.create_session("support-chat", subject="user-5")
        page = context.new_page()
        log_in(page, "olivia", f"/sessions/{session.id}/")
        expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
        conversation = page.locator("#session-conversation")
        expect(conversation).to_contain_text("No conversation messages.")

        agent.add_session_items(session.id, [{"role": "user", "content": "My order is late"}])
        expect(conversation).to_contain_text("My order is late")
        first = agent.put_session_state(session.id, {"order": 17}, base=0, rationale="asked")
        agent.patch_session_state(session.id, {"status": "late"}, base=first)
        versions = page.locator("details.state-version")
        expect(versions).to_have_count(2)
        agent.add_session_items(session.id, [{"role": "assistant", "content": "It ships tomorrow"}])
        expect(conversation).to_contain_text("It ships tomorrow")
        expect(page.locator("[data-session-messages]")).to_have_text("2")

        newest = page.locator("#state-version-2")
        newest.locator("summary").click()
        expect(newest.locator('[data-diff-path="/status"]')).to_be_visible()
        expect(newest).to_contain_text("late")
    finally:
        context.close()
        agent.close()
