"""A run's page in Chromium (issue 30, items 1 and 6): a client run's JSON-text results shown
as trees whose copy buttons copy the value; no run page wider than the window at 1440 and 390
px (a client run, a plan run, a long run); a long run's folded steps, status filter, jump to
step, timeline and single fork form; a run of 1,000 steps. Screenshots go to
/tmp/e2e-run-*.png."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, expect

from agentops.actors import Actor
from projects.roles import Role
from runs.control.create import run_create
from runs.models import Run
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, log_in
from testsupport.factories import make_run, make_user
from testsupport.long_runs import add_steps

pytestmark = [pytest.mark.long, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
# A client's tool result: a reservation whose long text and id must wrap, not widen the page.
RECORD = {
    "reservation": {"id": "ZFA04Y", "legs": ["LAS-IAH", "IAH-LAS"], "code": "X" * 300},
    "note": "Customer asked to move the return flight by one day if the fare allows it. " * 4,
}
WIDTHS: dict[str, ViewportSize] = {
    "desktop": {"width": 1440, "height": 900},
    "phone": {"width": 390, "height": 844},
}


@dataclass(frozen=True)
class Runs:
    client: Run
    plan: Run
    long: Run
    huge: Run


def _client_run(olivia: Any, goal: str, count: int) -> Run:
    run = make_run(olivia, agent="client", goal=goal)
    add_steps(run=run, count=count, value=RECORD, start=START)
    return run


@pytest.fixture
def runs(seeded: None) -> Runs:
    olivia = make_user("olivia", Role.OPERATOR)
    plan = run_create(
        actor=Actor.for_user(olivia),
        agent="plan",
        goal="Mail the Q3 total to the CFO " + "with every figure " * 6,
        steps=[
            {"tool": "calculate", "args": {"expression": "40+2"}, "rationale": "Add it up."},
            {
                "tool": "send_email",
                "args": {"to": ["cfo@example.com"], "subject": "Q3", "body": "Total: 42 " * 40},
                "rationale": "The user asked for it.",
            },
        ],
    )
    return Runs(
        client=_client_run(olivia, "Rebook the customer's return flight", 3),
        plan=plan,
        long=_client_run(olivia, "A long support conversation", 60),
        huge=_client_run(olivia, "A thousand tool calls", 1000),
    )


@pytest.fixture
def context(chromium: Browser, asgi_server: Any) -> Iterator[BrowserContext]:
    made = chromium.new_context(
        base_url=asgi_server.url, viewport=WIDTHS["desktop"], locale="en-GB", timezone_id="UTC"
    )
    made.grant_permissions(["clipboard-read", "clipboard-write"], origin=asgi_server.url)
    made.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    yield made
    made.close()


def open_run(context: BrowserContext, run: Run) -> Page:
    page = context.new_page()
    log_in(page, "olivia", f"/runs/{run.pk}/")
    expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
    return page


def test_a_client_runs_json_text_result_is_a_tree_with_working_copy_buttons(
    runs: Runs, context: BrowserContext
) -> None:
    page = open_run(context, runs.client)
    result = page.locator("#step-2 [data-step-result]")
    tree = result.locator(".json-tree")
    expect(tree.locator(".j-key", has_text="reservation")).to_be_visible()
    expect(tree.locator(".j-json").first).to_have_text("JSON")
    expect(result).not_to_contain_text('\\"')
    # The copy button before the whole result copies the JSON it holds, indented.
    tree.locator(":scope > [data-copy]").click()
    expect(tree.locator(":scope > [data-copy]")).to_have_attribute("data-copied", "copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert json.loads(copied) == {"value": RECORD}
    # A nested value's button copies that value alone: a string as its text.
    key = tree.locator(".j-key", has_text=re.compile(r"^id$"))
    key.locator("xpath=following-sibling::button[1]").click()
    assert page.evaluate("navigator.clipboard.readText()") == "ZFA04Y"
    # And an id.
    page.locator("[data-copy-text]").first.click()
    assert page.evaluate("navigator.clipboard.readText()") == str(runs.client.pk)
    page.screenshot(path=str(SCREENSHOTS / "e2e-run-client.png"), full_page=True)


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_no_run_page_is_wider_than_the_window(
    runs: Runs, context: BrowserContext, width: str
) -> None:
    page = context.new_page()
    page.set_viewport_size(WIDTHS[width])
    log_in(page, "olivia", f"/runs/{runs.client.pk}/")
    for name in ("client", "plan", "long"):
        run = getattr(runs, name)
        page.goto(f"/runs/{run.pk}/")
        # Open what is folded, so its contents are measured too.
        if page.locator("details.step-fold:not([open])").count():
            page.locator("details.step-fold:not([open]) > summary").first.click()
            expect(page.locator("details.step-fold[data-lazy-state=loaded]")).to_have_count(1)
        page.locator("#fork > summary").click()
        overflow = page.evaluate(
            "document.scrollingElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"the {name} run's page is {overflow} px too wide at {width}"
        page.screenshot(path=str(SCREENSHOTS / f"e2e-run-{name}-{width}.png"), full_page=False)


def test_a_long_runs_steps_fold_filter_jump_and_fork_from_one_form(
    runs: Runs, context: BrowserContext
) -> None:
    page = open_run(context, runs.long)
    step = page.locator("#step-5")
    expect(step.locator("details.step-fold")).not_to_have_attribute("open", "")
    expect(step.locator("[data-tool-call-id]")).to_have_count(0)
    # Opening a folded step loads its body.
    step.locator("summary").click()
    expect(step.locator("[data-tool-call-id]")).to_have_text("call_0005")
    expect(step.locator("[data-step-result] .j-key", has_text="reservation")).to_be_visible()

    # The status filter shows the failed step (#13) alone, then the tool error (#37).
    page.select_option("[data-step-filter]", "failed")
    expect(page.locator(".steps > .step:visible")).to_have_count(1)
    expect(page.locator("#step-13")).to_be_visible()
    expect(page.locator("[data-filter-count]")).to_have_text("1 of 60 steps shown")
    page.select_option("[data-step-filter]", "tool_error")
    expect(page.locator(".steps > .step:visible")).to_have_count(1)
    expect(page.locator("#step-37")).to_be_visible()
    page.select_option("[data-step-filter]", "")
    expect(page.locator(".steps > .step:visible")).to_have_count(60)

    # Jump to a folded step: it opens, loads and is in view.
    page.fill("#step-jump", "44")
    page.press("#step-jump", "Enter")
    jumped = page.locator("#step-44")
    expect(jumped).to_have_class(re.compile(r"\bjumped\b"))
    expect(jumped.locator("[data-tool-call-id]")).to_have_text("call_0044")
    expect(jumped).to_be_in_viewport()

    # The timeline: a bar for each tool call and model turn; a tool call's label jumps.
    page.locator("#timeline-fold > summary").click()
    expect(page.locator("[data-tl-kind=tool]")).to_have_count(60)
    expect(page.locator("[data-tl-kind=model]")).to_have_count(12)
    page.locator('[data-jump="30"]').click()
    expect(page.locator("#step-30 [data-tool-call-id]")).to_have_text("call_0030")
    expect(page.locator("#step-30")).to_be_in_viewport()

    # One fork form for the page; a step's "Fork" link fills it in.
    expect(page.locator("[data-action=fork]")).to_have_count(1)
    expect(page.locator("#step-30 [data-fork-from]")).to_have_count(0)  # past failed #13
    page.fill("#step-jump", "4")
    page.press("#step-jump", "Enter")
    page.locator("#step-4 [data-fork-from]").click()
    expect(page.locator("#fork")).to_have_attribute("open", "")
    expect(page.locator("#fork-from")).to_have_value("4")
    expect(page.locator("#fork-from")).to_be_focused()
    page.screenshot(path=str(SCREENSHOTS / "e2e-run-long.png"), full_page=False)


def test_a_run_of_a_thousand_steps_opens_and_jumps_to_its_last_step(
    runs: Runs, context: BrowserContext
) -> None:
    page = open_run(context, runs.huge)
    expect(page.locator(".steps > .step")).to_have_count(1000)
    # Folded: the page holds the steps' header rows, not their bodies.
    open_bodies = page.locator("details.step-fold[open]").count()
    assert open_bodies == 1000 // 50 + 1  # the failed steps and the last
    nodes = page.evaluate("document.getElementsByTagName('*').length")
    assert nodes < 40_000, nodes
    page.fill("#step-jump", "998")
    page.press("#step-jump", "Enter")
    expect(page.locator("#step-998 [data-tool-call-id]")).to_have_text("call_0998")
    # A link to a step opens it as well.
    page.goto(f"/runs/{runs.huge.pk}/#step-500")
    expect(page.locator("#step-500 [data-tool-call-id]")).to_have_text("call_0500")
