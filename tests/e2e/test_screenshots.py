"""The README's screenshots: the approvals inbox, a run's page, the overview and the admin's
retention policy preview, 1440 and 390 px wide, written to ``docs/screenshots/``.

Not a test of behaviour: it runs only when asked for by its marker (``tests/e2e/conftest.py``
leaves it out otherwise), against the e2e fixtures (a test database, daphne, Debian's
chromium), with demo data made here through the services::

    DATABASE_URL=... REDIS_URL=... .venv/bin/pytest -m screenshots tests/e2e/test_screenshots.py

Each PNG is the page from its top, at most ``MAX_HEIGHT`` px of it (a page's top says what
it is; the files stay small enough for the repository).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from agentops.actors import Actor
from projects.roles import Role
from runs.control.create import run_create
from runs.management.commands.seed_demo import DEMO_TRANSCRIPT
from runs.models import RetentionPolicy, Run
from tests.e2e.conftest import TIMEOUT_MS, log_in
from testsupport.factories import EMAIL_ARGS, make_user

pytestmark = [pytest.mark.screenshots, pytest.mark.django_db(transaction=True)]

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
# Viewport (width, height) of each size, and how much of a page's height a screenshot keeps.
VIEWPORTS = {1440: (1440, 900), 390: (390, 844)}
MAX_HEIGHT = {1440: 1800, 390: 2400}

RESERVATION = {
    "reservation_id": "ZFA04Y",
    "customer": {"name": "Ada Lovelace", "tier": "gold", "email": "ada@example.com"},
    "flights": [
        {"number": "HAT170", "from": "LAS", "to": "IAH", "date": "2024-05-17"},
        {"number": "HAT112", "from": "IAH", "to": "LAS", "date": "2024-05-21"},
    ],
}


def _demo_data() -> tuple[Run, RetentionPolicy]:
    """Runs of every kind through the services (tasks run eagerly): succeeded, failed, waiting
    for a reviewer, a transcript replay; some finished 90 days ago, for the retention
    preview. Returns the run shown on the run page and the retention policy."""
    olivia = make_user("olivia", Role.OPERATOR)
    make_user("rita", Role.REVIEWER)
    make_user("ada", superuser=True)
    actor = Actor.for_user(olivia)

    def plan(goal: str, steps: list[dict[str, object]]) -> Run:
        return run_create(actor=actor, agent="plan", goal=goal, steps=steps)

    old = [
        plan(f"Weekly report {week}", [{"tool": "calculate", "args": {"expression": f"{week}*7"}}])
        for week in (31, 32, 33)
    ]
    plan("Add up an invoice", [
        {"tool": "calculate", "args": {"expression": "129.5 + 40 * 2"},
         "rationale": "Total of one item and two services"},
        {"tool": "echo", "args": {"value": "total computed"}},
    ])  # fmt: skip
    plan("Divide the budget", [{"tool": "calculate", "args": {"expression": "1/0"}}])
    run_create(actor=actor, agent="transcript", goal="Replay: cancel reservation ZFA04Y",
               transcript=DEMO_TRANSCRIPT)  # fmt: skip
    plan("Email the customer their refund", [
        {"tool": "calculate", "args": {"expression": "300 - 45"},
         "rationale": "Refund is the fare minus the change fee"},
        {"tool": "send_email", "args": {"to": ["customer@example.com"], "subject": "Your refund",
         "body": "We refunded 255 USD to your card."},
         "rationale": "The customer asked for written confirmation"},
    ])  # fmt: skip
    shown = plan("Move the return flight of reservation ZFA04Y by one day", [
        {"tool": "echo", "args": {"value": RESERVATION}, "rationale": "Read the reservation"},
        {"tool": "calculate", "args": {"expression": "412.5 - 380"},
         "rationale": "Fare difference of the new flight"},
        {"tool": "echo", "args": {"value": {"new_flight": "HAT114", "date": "2024-05-22"}},
         "rationale": "The flight the customer picked"},
        {"tool": "send_email", "args": EMAIL_ARGS,
         "rationale": "Confirm the change and the 32.50 USD fare difference"},
    ])  # fmt: skip
    long_ago = timezone.now() - timedelta(days=90)
    Run.objects.filter(pk__in=[run.pk for run in old]).update(
        created_at=long_ago, finished_at=long_ago
    )
    policy = RetentionPolicy.objects.create(name="Keep 30 days", ttl_days=30)
    return shown, policy


def _save(page: Page, name: str, width: int) -> None:
    page.wait_for_load_state("networkidle")
    height = min(page.evaluate("document.scrollingElement.scrollHeight"), MAX_HEIGHT[width])
    page.screenshot(
        path=OUT / f"{name}-{width}.png",
        full_page=True,
        clip={"x": 0, "y": 0, "width": width, "height": height},
    )


@pytest.mark.parametrize("width", sorted(VIEWPORTS))
def test_screenshots(seeded, asgi_server, chromium: Browser, width: int) -> None:
    shown, policy = _demo_data()
    OUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)
    w, h = VIEWPORTS[width]
    # (user, file name, path, what to open before the screenshot)
    shots: list[tuple[str, str, str, Callable[[Page], None] | None]] = [
        ("rita", "inbox", "/approvals/", _open_first_card),
        ("olivia", "run-page", f"/runs/{shown.pk}/", _open_a_state_diff),
        ("olivia", "overview", "/overview/", None),
        ("ada", "retention-preview", f"/admin/runs/retentionpolicy/{policy.pk}/preview/", None),
    ]
    for user, name, path, prepare in shots:
        context = chromium.new_context(base_url=asgi_server.url, viewport={"width": w, "height": h})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        log_in(page, user, path)
        if prepare is not None:
            prepare(page)
        _save(page, name, width)
        context.close()


def _open_first_card(page: Page) -> None:
    card = page.locator("[data-card]").first
    card.locator("[data-card-summary]").click()
    card.locator("details.context summary").click()
    expect(card.locator(".earlier-steps")).to_be_visible()


def _open_a_state_diff(page: Page) -> None:
    page.click("#checkpoint-1 summary")
    expect(page.locator("#checkpoint-1 [data-diff-kind]").first).to_be_visible()
