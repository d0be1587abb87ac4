"""The overview page in a real browser: its four charts draw (Chart.js canvases, no console
error, no CSP violation), and the throughput chart and totals change, without reload, once a
run the worker executes has finished."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from runs.control.create import run_create
from runs.models import Run, RunStatus
from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, log_in

pytestmark = pytest.mark.e2e

CALCULATE = {"tool": "calculate", "args": {"expression": "6*7"}}
STEPS_DRAWN = """() => {
  const chart = Chart.getChart(document.querySelector('[data-chart="throughput"]'));
  return chart.data.datasets[1].data.reduce((sum, value) => sum + value, 0);
}"""


def test_the_overview_draws_its_charts_and_follows_a_finished_run(
    worker, asgi_server, operator, chromium
):
    context = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 1000}
    )
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda m: (
            problems.append(f"{m.text} ({m.location.get('url')})") if m.type == "error" else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(str(error)))

    log_in(page, "olivia", "/overview/")
    overview = page.locator("[data-overview]")
    expect(overview).not_to_have_attribute("data-updates", "0")
    for name in ("throughput", "failures", "approvals", "cost"):
        canvas = page.locator(f'canvas[data-chart="{name}"]')
        expect(canvas).to_be_visible()
        assert page.evaluate(
            f"() => Chart.getChart(document.querySelector('[data-chart=\"{name}\"]')) !== undefined"
        )
    expect(page.locator('[data-total="steps"]')).to_have_text("0")
    assert page.evaluate(STEPS_DRAWN) == 0
    page.evaluate("window.__noReload = 1")

    run = run_create(
        actor=Actor.for_user(operator), agent="plan", goal="chart me", steps=[CALCULATE, CALCULATE]
    )
    wait_for(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists())

    expect(page.locator('[data-total="steps"]')).to_have_text("2")
    expect(page.locator('[data-total="runs"]')).to_have_text("1")
    expect(page.locator('[data-total="failure_rate"]')).to_have_text("0.0 %")
    expect(page.locator('[data-total="runs_compensated"]')).to_have_text("0")
    expect(page.locator('[data-total="runs_compensation_failed"]')).to_have_text("0")
    assert page.evaluate(STEPS_DRAWN) == 2
    assert page.evaluate("window.__noReload") == 1
    page.screenshot(path=str(SCREENSHOTS / "e2e-overview.png"), full_page=True)
    assert problems == []
    context.close()


def test_the_overview_lists_and_filters_runs_by_agent_and_prompt_version(
    worker, asgi_server, operator, chromium
):
    actor = Actor.for_user(operator)
    for version, label in (("1.0", "v1"), ("2.0", "v2")):
        identity = {
            "agent_name": "desk",
            "agent_version": version,
            "prompt": {"content": f"policy {label}", "name": "refunds", "version": label},
        }
        run_create(actor=actor, agent="client", goal="versioned", identity=identity)
    context = chromium.new_context(base_url=asgi_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "olivia", "/overview/")
    rows = page.locator("[data-by-version] tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("desk")
    form = page.locator("[data-overview-versions]")
    form.get_by_label("Agent version").fill("2.0")
    form.get_by_role("button", name="Filter").click()
    expect(page.locator("[data-overview]")).to_have_attribute("data-versions", "agent_version=2.0")
    expect(rows).to_have_count(1)
    expect(rows.nth(0).locator("td").nth(1)).to_have_text("2.0")
    expect(rows.nth(0).locator("td").nth(3)).to_have_text("v2")
    expect(page.locator('[data-total="runs"]')).to_have_text("1")
    context.close()
